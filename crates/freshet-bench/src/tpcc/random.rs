//! The random functions of the TPC-C specification (clause 4.3.2): uniform numbers, a- and
//! n-strings, NURand, customer last names from syllables, zip codes, "ORIGINAL" data.
//!
//! The generator is a seeded SplitMix64, so a seed and a stream name give the same numbers on
//! every run and every machine: the loader derives one stream per (seed, warehouse, table), which
//! keeps parallel loading deterministic.

/// A small, fast, seeded pseudo-random generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The stream for one purpose (e.g. seed, warehouse 3, table "stock").
    pub fn stream(seed: u64, warehouse: u64, name: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        let mut r = Rng::new(seed ^ h.rotate_left(17) ^ warehouse.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `lo..=hi`.
    pub fn uniform(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo + 1) as u64;
        lo + (((self.next_u64() >> 11) as u128 * span as u128) >> 53) as i64
    }

    /// NURand(A, x, y) with run-time constant `c` (clause 2.1.6).
    pub fn nurand(&mut self, a: i64, x: i64, y: i64, c: i64) -> i64 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// A random a-string of length `min..=max` (alphanumeric characters).
    pub fn astring(&mut self, min: usize, max: usize) -> String {
        let len = self.uniform(min as i64, max as i64) as usize;
        (0..len).map(|_| ALNUM[self.uniform(0, ALNUM.len() as i64 - 1) as usize] as char).collect()
    }

    /// A random n-string of length `min..=max` (digits).
    pub fn nstring(&mut self, min: usize, max: usize) -> String {
        let len = self.uniform(min as i64, max as i64) as usize;
        (0..len).map(|_| (b'0' + self.uniform(0, 9) as u8) as char).collect()
    }

    /// A zip code: four random digits and "11111" (clause 4.3.2.7).
    pub fn zip(&mut self) -> String {
        let mut z = self.nstring(4, 4);
        z.push_str("11111");
        z
    }

    /// i_data / s_data: an a-string of 26..50 characters, in 10% of rows with "ORIGINAL" at a
    /// random position (clause 4.3.3.1).
    pub fn data_with_original(&mut self) -> String {
        let mut s = self.astring(26, 50);
        if self.uniform(1, 10) == 1 {
            let at = self.uniform(0, s.len() as i64 - 8) as usize;
            s.replace_range(at..at + 8, "ORIGINAL");
        }
        s
    }

    /// A random amount in `lo..=hi` hundredths.
    pub fn cents(&mut self, lo: i64, hi: i64) -> i64 {
        self.uniform(lo, hi)
    }
}

/// The customer last name for a number 0..=999: three syllables by its digits (clause 4.3.2.3).
pub fn last_name(n: i64) -> String {
    let n = n as usize;
    let mut s = String::with_capacity(15);
    s.push_str(SYLLABLES[n / 100]);
    s.push_str(SYLLABLES[n / 10 % 10]);
    s.push_str(SYLLABLES[n % 10]);
    s
}

/// The run-time constants C of NURand (clause 2.1.6): for customer last names, customer ids and
/// item ids. The C for last names at run time differs from the load's by a delta the
/// specification bounds (clause 2.1.6.1: 65..=119, neither 96 nor 112).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NurandConstants {
    pub c_last: i64,
    pub c_id: i64,
    pub ol_i_id: i64,
}

impl NurandConstants {
    /// The constants the loader uses, from the seed.
    pub fn for_load(seed: u64) -> NurandConstants {
        let mut r = Rng::stream(seed, 0, "nurand-constants");
        NurandConstants { c_last: r.uniform(0, 255), c_id: r.uniform(0, 1023), ol_i_id: r.uniform(0, 8191) }
    }

    /// Constants for a run: C_LAST within the allowed delta of the load's, the others free.
    pub fn for_run(load: NurandConstants, rng: &mut Rng) -> NurandConstants {
        loop {
            let c_last = rng.uniform(0, 255);
            let delta = (c_last - load.c_last).abs();
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                return NurandConstants { c_last, c_id: rng.uniform(0, 1023), ol_i_id: rng.uniform(0, 8191) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4).map({
            let mut r = Rng::stream(7, 1, "stock");
            move |_| r.next_u64()
        })
        .collect();
        let b: Vec<u64> = (0..4).map({
            let mut r = Rng::stream(7, 1, "stock");
            move |_| r.next_u64()
        })
        .collect();
        let mut other = Rng::stream(7, 2, "stock");
        assert_eq!(a, b);
        assert_ne!(a[0], other.next_u64());
    }

    #[test]
    fn uniform_and_nurand_stay_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let u = r.uniform(3, 9);
            assert!((3..=9).contains(&u));
            let n = r.nurand(1023, 1, 3000, 259);
            assert!((1..=3000).contains(&n));
        }
    }

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn run_constant_delta_is_valid() {
        let load = NurandConstants::for_load(42);
        let mut r = Rng::new(5);
        for _ in 0..100 {
            let run = NurandConstants::for_run(load, &mut r);
            let d = (run.c_last - load.c_last).abs();
            assert!((65..=119).contains(&d) && d != 96 && d != 112);
        }
    }
}
