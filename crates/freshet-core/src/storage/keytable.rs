//! The hash table of a primary-key index: (key, row) entries in one array of 32-byte slots,
//! open addressing with linear probing.
//!
//! A lookup's first memory access is the slot the key's hash names, and the entry is usually
//! there or in the next slot of the same cache line: one cache miss per lookup where a
//! table with a separate control array (SwissTable) takes two. The address of that slot is
//! known from the hash alone, so a caller that knows its next keys ahead can prefetch their
//! slots ([`KeyTable::prefetch`]) and let the misses of several lookups overlap (a
//! transaction's order lines, a list of keys).
//!
//! Invariants:
//! - The capacity is zero or a power of two, and at least one slot is always empty (occupied
//!   and removed slots together stay at most 5/8 of the capacity), so every probe ends.
//! - An entry sits at its key's home slot (the hash's low bits) or after it, with no empty
//!   slot between: a probe runs from the home slot to the first empty slot and passes
//!   removed ones ("tombstones"). A removal leaves a tombstone unless the next slot is empty,
//!   in which case it and the tombstones before it become empty.
//! - All-zero memory is an empty slot, so a new table is zeroed memory the kernel supplies on
//!   first touch.
//!
//! Growing a large table moves every entry into one twice its size, and most of that step was
//! the kernel supplying and zeroing the new table's pages as the moves first touched them
//! (about 2 s per GiB on the machines measured; order_line's table at TPC-C W=5 is 256 MiB).
//! So once a table of at least [`PREPARE_FROM`] slots is three quarters of the way to its
//! next growth, a helper thread allocates the bigger table and touches every page of it
//! ([`KeyTable::spare`]); the growth then only moves the entries.

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;

use super::index::same_bytes;
use super::RowId;

/// Keys up to this long are stored in the slot.
const INLINE: usize = 16;
/// `Slot::state` of a slot that holds nothing and ends probes.
const EMPTY: u32 = 0;
/// `Slot::state` of a removed entry: probes go on past it, inserts may reuse it.
const REMOVED: u32 = 1;
/// `Slot::state` of an entry: its key's length plus this.
const KEY_LEN_BASE: u32 = 2;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    /// The key when it is at most [`INLINE`] bytes long; otherwise its first four bytes are
    /// the key's position in `KeyTable::long_keys` (little-endian).
    key: [u8; INLINE],
    /// [`EMPTY`], [`REMOVED`], or the key length plus [`KEY_LEN_BASE`].
    state: u32,
    /// The hash's high 32 bits: most slots of other keys are told apart without reading the key.
    tag: u32,
    row: u64,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

/// Tables of fewer slots grow without a prepared spare: their growth is short.
const PREPARE_FROM: usize = 1 << 16;

pub struct KeyTable {
    slots: Box<[Slot]>,
    /// The table of twice the capacity the next growth will take, being zeroed and faulted
    /// in by a helper thread (see the module documentation).
    spare: Option<std::thread::JoinHandle<Box<[Slot]>>>,
    /// Entries.
    live: usize,
    /// Tombstones.
    removed: usize,
    /// Keys longer than [`INLINE`] bytes; a freed position is listed in `free_long`.
    long_keys: Vec<Box<[u8]>>,
    free_long: Vec<u32>,
    hasher: DefaultHashBuilder,
}

impl fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyTable").field("entries", &self.live).field("capacity", &self.slots.len()).finish()
    }
}

impl Default for KeyTable {
    fn default() -> Self {
        KeyTable { slots: Box::new([]), spare: None, live: 0, removed: 0, long_keys: Vec::new(), free_long: Vec::new(), hasher: DefaultHashBuilder::default() }
    }
}

/// `n` empty slots, from zeroed memory.
fn empty_slots(n: usize) -> Box<[Slot]> {
    if n == 0 {
        return Box::new([]);
    }
    let layout = std::alloc::Layout::array::<Slot>(n).unwrap_or_else(|_| panic!("a hash index of {n} slots does not fit in memory"));
    // SAFETY: the layout's size is not zero. A slot of all-zero bytes is a valid `Slot`
    // (integers and bytes only) and an empty one, so the allocation is `n` initialised
    // slots; the box frees it with the same layout (`Layout::array::<Slot>(n)`).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<Slot>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// `n` empty slots whose memory the kernel has supplied already: every page is written once
/// (a zero over a zero), so the faults and the zeroing happen here, on the calling thread.
fn faulted_slots(n: usize) -> Box<[Slot]> {
    let mut slots = empty_slots(n);
    const PER_PAGE: usize = 4096 / std::mem::size_of::<Slot>();
    for slot in slots.iter_mut().step_by(PER_PAGE) {
        // SAFETY: a write through a valid `&mut u32`; volatile so that it is not dropped as
        // a store of the value already there.
        unsafe { std::ptr::write_volatile(&mut slot.state, EMPTY) };
    }
    slots
}

/// Where in `KeyTable::long_keys` the key of a slot holding a long key is.
fn long_position(slot: &Slot) -> usize {
    u32::from_le_bytes([slot.key[0], slot.key[1], slot.key[2], slot.key[3]]) as usize
}

impl KeyTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    fn key_of<'a>(&'a self, slot: &'a Slot) -> &'a [u8] {
        let len = (slot.state - KEY_LEN_BASE) as usize;
        if len <= INLINE {
            &slot.key[..len]
        } else {
            &self.long_keys[long_position(slot)]
        }
    }

    fn holds(&self, slot: &Slot, tag: u32, key: &[u8]) -> bool {
        slot.tag == tag && slot.state == key.len() as u32 + KEY_LEN_BASE && same_bytes(self.key_of(slot), key)
    }

    /// Asks the processor for the slot where a lookup of `key` starts. A hint: nothing the
    /// program observes changes.
    #[inline]
    pub fn prefetch(&self, key: &[u8]) {
        if self.slots.is_empty() {
            return;
        }
        super::prefetch_address(self.slots.as_ptr().wrapping_add(self.hash(key) as usize & self.mask()));
    }

    /// The rows with an entry for `key`.
    pub fn rows<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = RowId> + 'a {
        let hash = self.hash(key);
        let mut at = hash as usize & self.mask();
        let tag = (hash >> 32) as u32;
        let mut done = self.slots.is_empty();
        std::iter::from_fn(move || {
            while !done {
                let slot = &self.slots[at];
                if slot.state == EMPTY {
                    done = true;
                    return None;
                }
                at = (at + 1) & self.mask();
                if self.holds(slot, tag, key) {
                    return Some(RowId(slot.row));
                }
            }
            None
        })
    }

    /// Adds the entry (key, row); false if it is there already.
    pub fn insert(&mut self, key: &[u8], row: RowId) -> bool {
        self.reserve(1);
        let hash = self.hash(key);
        let tag = (hash >> 32) as u32;
        let mask = self.mask();
        let mut at = hash as usize & mask;
        let mut reuse = None;
        loop {
            let slot = &self.slots[at];
            match slot.state {
                EMPTY => break,
                REMOVED => {
                    reuse.get_or_insert(at);
                }
                _ if slot.row == row.0 && self.holds(slot, tag, key) => return false,
                _ => {}
            }
            at = (at + 1) & mask;
        }
        let at = match reuse {
            Some(r) => {
                self.removed -= 1;
                r
            }
            None => at,
        };
        let mut stored = [0u8; INLINE];
        if key.len() <= INLINE {
            stored[..key.len()].copy_from_slice(key);
        } else {
            let position = match self.free_long.pop() {
                Some(p) => {
                    self.long_keys[p as usize] = key.into();
                    p
                }
                None => {
                    self.long_keys.push(key.into());
                    u32::try_from(self.long_keys.len() - 1).unwrap_or_else(|_| panic!("more than 2^32 long keys in one hash index"))
                }
            };
            stored[..4].copy_from_slice(&position.to_le_bytes());
        }
        let state = u32::try_from(key.len()).ok().and_then(|n| n.checked_add(KEY_LEN_BASE)).unwrap_or_else(|| panic!("an index key of {} bytes", key.len()));
        self.slots[at] = Slot { key: stored, state, tag, row: row.0 };
        self.live += 1;
        true
    }

    /// Removes the entry (key, row) if present.
    pub fn remove(&mut self, key: &[u8], row: RowId) {
        if self.slots.is_empty() {
            return;
        }
        let hash = self.hash(key);
        let tag = (hash >> 32) as u32;
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            let slot = &self.slots[at];
            if slot.state == EMPTY {
                return;
            }
            if slot.state != REMOVED && slot.row == row.0 && self.holds(slot, tag, key) {
                break;
            }
            at = (at + 1) & mask;
        }
        let len = (self.slots[at].state - KEY_LEN_BASE) as usize;
        if len > INLINE {
            let position = long_position(&self.slots[at]);
            self.long_keys[position] = Box::new([]);
            self.free_long.push(position as u32);
        }
        self.live -= 1;
        if self.slots[(at + 1) & mask].state == EMPTY {
            // Nothing probes past this slot: it and the tombstones just before it end probes.
            self.slots[at] = Slot { key: [0; INLINE], state: EMPTY, tag: 0, row: 0 };
            let mut before = at.wrapping_sub(1) & mask;
            while self.slots[before].state == REMOVED {
                self.slots[before].state = EMPTY;
                self.removed -= 1;
                before = before.wrapping_sub(1) & mask;
            }
        } else {
            self.slots[at].state = REMOVED;
            self.removed += 1;
        }
    }

    /// Makes room for `additional` more entries: when entries and tombstones would fill more
    /// than 5/8 of the slots, the entries move to a table where they fill at most half (a
    /// larger one, or one of the same size without the tombstones).
    pub fn reserve(&mut self, additional: usize) {
        let used = self.live + self.removed + additional;
        if used * 8 <= self.slots.len() * 5 {
            if used * 32 >= self.slots.len() * 15 && self.spare.is_none() && self.slots.len() >= PREPARE_FROM {
                self.spare = self.prepare(self.slots.len() * 2);
            }
            return;
        }
        let wanted = ((self.live + additional) * 2).next_power_of_two().max(16);
        let capacity = wanted.max(self.slots.len());
        let fresh = match self.spare.take().and_then(|spare| spare.join().ok()) {
            Some(spare) if spare.len() == capacity => spare,
            _ => empty_slots(capacity),
        };
        let old = std::mem::replace(&mut self.slots, fresh);
        let mask = self.mask();
        for slot in old.iter().filter(|s| s.state >= KEY_LEN_BASE) {
            let mut at = self.hash(self.key_of(slot)) as usize & mask;
            while self.slots[at].state != EMPTY {
                at = (at + 1) & mask;
            }
            self.slots[at] = *slot;
        }
        self.removed = 0;
    }

    /// Starts a helper thread that makes a table of `n` slots with its pages faulted in;
    /// `None` if no thread can be started (the growth then allocates its table itself).
    fn prepare(&self, n: usize) -> Option<std::thread::JoinHandle<Box<[Slot]>>> {
        // Off the executor's CPU, which it would otherwise take while the executor runs.
        let cpus = crate::executor::cpus::helper_cpus();
        let nice = crate::executor::cpus::process_niceness();
        std::thread::Builder::new()
            .name("freshet-hash-grow".into())
            .spawn(move || {
                // Not at the priority of the executor that started it.
                let _ = crate::executor::cpus::set_thread_niceness(nice);
                if let Some(cpus) = cpus {
                    let _ = crate::executor::cpus::pin_current_thread(&cpus);
                }
                faulted_slots(n)
            })
            .ok()
    }

    /// Whether a bigger table is being (or has been) prepared for the next growth.
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(t: &KeyTable, key: &[u8]) -> Vec<u64> {
        let mut r: Vec<u64> = t.rows(key).map(|r| r.0).collect();
        r.sort_unstable();
        r
    }

    #[test]
    fn entries_are_found_until_removed() {
        let mut t = KeyTable::new();
        assert!(rows(&t, b"a").is_empty());
        t.remove(b"a", RowId(1));
        assert!(t.insert(b"a", RowId(1)));
        assert!(!t.insert(b"a", RowId(1)));
        assert!(t.insert(b"a", RowId(2)));
        assert!(t.insert(b"b", RowId(1)));
        assert_eq!(rows(&t, b"a"), vec![1, 2]);
        assert_eq!(rows(&t, b"b"), vec![1]);
        assert_eq!(t.len(), 3);
        t.remove(b"a", RowId(1));
        t.remove(b"a", RowId(7));
        assert_eq!(rows(&t, b"a"), vec![2]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn long_keys_are_kept_outside_the_slots_and_their_places_reused() {
        let mut t = KeyTable::new();
        let long = |i: u64| format!("a key longer than sixteen bytes {i}").into_bytes();
        for i in 0..100 {
            assert!(t.insert(&long(i), RowId(i)));
        }
        for i in 0..50 {
            t.remove(&long(i), RowId(i));
        }
        for i in 100..150 {
            assert!(t.insert(&long(i), RowId(i)));
        }
        assert_eq!(t.long_keys.len(), 100, "freed positions are reused");
        for i in 0..150 {
            let expected = if i < 50 { vec![] } else { vec![i] };
            assert_eq!(rows(&t, &long(i)), expected, "key {i}");
        }
        // A key of exactly 16 bytes stays inline; one of 17 goes outside.
        assert!(t.insert(&[7u8; 16], RowId(1)));
        assert!(t.insert(&[7u8; 17], RowId(2)));
        assert_eq!(rows(&t, &[7u8; 16]), vec![1]);
        assert_eq!(rows(&t, &[7u8; 17]), vec![2]);
        assert_eq!(t.long_keys.len(), 101);
    }

    /// The table against a model, through growth, removals (tombstones and their clearing)
    /// and rebuilds without growth.
    #[test]
    fn agrees_with_a_model_under_inserts_and_removals() {
        let mut t = KeyTable::new();
        let mut model: std::collections::BTreeSet<(u64, u64)> = std::collections::BTreeSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..200_000u64 {
            let r = next();
            let key = r % 5_000;
            let row = (r >> 20) % 3;
            let bytes = key.to_be_bytes();
            if r % 3 == 0 {
                t.remove(&bytes, RowId(row));
                model.remove(&(key, row));
            } else {
                assert_eq!(t.insert(&bytes, RowId(row)), model.insert((key, row)), "step {step}");
            }
            assert_eq!(t.len(), model.len());
            assert!((t.live + t.removed) * 8 <= t.capacity() * 5);
        }
        for key in 0..5_000u64 {
            let expected: Vec<u64> = model.range((key, 0)..=(key, u64::MAX)).map(|&(_, r)| r).collect();
            assert_eq!(rows(&t, &key.to_be_bytes()), expected, "key {key}");
        }
    }

    #[test]
    fn a_large_table_grows_into_a_table_prepared_ahead() {
        let mut t = KeyTable::new();
        let mut n = 0u64;
        while !t.has_spare() {
            assert!(t.insert(&n.to_be_bytes(), RowId(n)));
            n += 1;
        }
        let capacity = t.capacity();
        assert!(capacity >= PREPARE_FROM);
        while t.capacity() == capacity {
            assert!(t.insert(&n.to_be_bytes(), RowId(n)));
            n += 1;
        }
        assert_eq!(t.capacity(), capacity * 2, "the prepared table is the one taken");
        assert!(!t.has_spare());
        assert_eq!(t.len() as u64, n);
        for k in (0..n).step_by(97).chain([n - 1]) {
            assert_eq!(rows(&t, &k.to_be_bytes()), vec![k]);
        }
    }

    #[test]
    fn prefetch_of_an_empty_table_is_harmless() {
        let t = KeyTable::new();
        t.prefetch(b"x");
        let mut t = KeyTable::new();
        t.reserve(1000);
        assert!(t.capacity() >= 2000);
        t.prefetch(b"x");
    }
}
