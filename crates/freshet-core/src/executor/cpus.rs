//! Where threads run: each partition executor on a CPU of its own, every other thread on the
//! CPUs the executors leave.
//!
//! An executor is busy whenever its clients are, and it answers them fastest when nothing else
//! runs on its CPU. Left to the kernel, a client thread that an executor wakes is often placed
//! on the executor's own CPU (the waker's), where it preempts the executor; with an analytical
//! query busy on the other CPU this happened on most wakes. Measured with TPC-C and one CH
//! stream on 2 cores, three alternating pairs (ARCHITECTURE.md): unpinned, TPC-C kept 83.6% of
//! its throughput alone on average; with the executor on a CPU of its own, 90.9%.

/// The CPUs of the executors and of everything else. Unpinned (the default) leaves placement
/// to the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuPlan {
    /// Executor `i` runs on `executors[i]`; empty when unpinned.
    executors: Vec<usize>,
    /// The CPUs every other thread may use; empty when unpinned.
    others: Vec<usize>,
}

impl CpuPlan {
    /// No placement.
    pub fn unpinned() -> CpuPlan {
        CpuPlan::default()
    }

    /// Executors on the last `partitions` CPUs the calling thread may use, in order, and every
    /// other thread on the CPUs before them; unpinned when that would leave no CPU for the
    /// other threads or the allowed CPUs cannot be read.
    pub fn for_partitions(partitions: usize) -> CpuPlan {
        Self::split(allowed_cpus().unwrap_or_default(), partitions)
    }

    fn split(allowed: Vec<usize>, partitions: usize) -> CpuPlan {
        if partitions == 0 || allowed.len() <= partitions {
            return CpuPlan::unpinned();
        }
        let mut others = allowed;
        let executors = others.split_off(others.len() - partitions);
        CpuPlan { executors, others }
    }

    pub fn is_pinned(&self) -> bool {
        !self.executors.is_empty()
    }

    /// The CPU of executor `id`, when pinned.
    pub fn executor_cpu(&self, id: usize) -> Option<usize> {
        self.executors.get(id).copied()
    }

    /// Restricts the calling thread, and the threads it starts from now on, to the CPUs the
    /// executors leave; does nothing when unpinned. A failure (a CPU taken away since) is
    /// logged and leaves the thread where it was.
    pub fn keep_off_executors(&self) {
        if self.is_pinned()
            && let Err(e) = pin_current_thread(&self.others)
        {
            tracing::warn!("cannot keep this thread off the executors' CPUs: {e}");
        }
    }
}

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set within its bounds (CPU_SETSIZE).
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// The CPUs for a helper the calling thread starts for work it will wait for later (a hash
/// table prepared for growth): the process's main thread's CPUs, without the calling thread's
/// own CPU when it is pinned to that one (an executor), so that the helper does not take the
/// time of the thread it is helping. `None` when the CPUs cannot be read.
pub fn helper_cpus() -> Option<Vec<usize>> {
    let own = allowed_cpus().ok()?;
    // SAFETY: as in `allowed_cpus`; getpid names the process's main thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`.
    if unsafe { libc::sched_getaffinity(libc::getpid(), std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads the set within its bounds (CPU_SETSIZE).
    let mut cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
    if let [pinned] = own.as_slice()
        && cpus.len() > 1
    {
        cpus.retain(|c| c != pinned);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Restricts the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's scheduling niceness (on Linux each thread has its own).
pub fn thread_niceness() -> i32 {
    // SAFETY: getpriority only reads its integer arguments; `who = 0` is the calling thread.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// The process's niceness: its main thread's, which an executor's raised priority leaves
/// alone.
pub fn process_niceness() -> i32 {
    // SAFETY: getpid and getpriority only read their integer arguments.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t) }
}

/// Sets the calling thread's niceness. Raising it needs no privilege; lowering it needs
/// CAP_SYS_NICE (or an RLIMIT_NICE that allows it). A thread started or a process forked
/// afterwards inherits it.
pub fn set_thread_niceness(nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority only reads its integer arguments; `who = 0` is the calling thread.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executors_take_the_last_cpus_and_leave_at_least_one() {
        let plan = CpuPlan::split(vec![0, 1, 2, 3], 2);
        assert_eq!((plan.executor_cpu(0), plan.executor_cpu(1), plan.executor_cpu(2)), (Some(2), Some(3), None));
        assert_eq!(plan.others, vec![0, 1]);
        assert!(!CpuPlan::split(vec![0, 1], 2).is_pinned());
        assert!(!CpuPlan::split(vec![5], 1).is_pinned());
        assert_eq!(CpuPlan::split(vec![4, 7], 1), CpuPlan { executors: vec![7], others: vec![4] });
    }

    #[test]
    fn a_thread_pinned_runs_only_where_it_was_told() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let last = *allowed.last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_current_thread(&[last]).unwrap();
            allowed_cpus().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![last]);
        // Only that thread moved.
        assert_eq!(allowed_cpus().unwrap(), allowed);
    }
}
