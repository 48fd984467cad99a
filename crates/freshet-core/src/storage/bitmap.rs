//! A growable bitmap in 64-bit words, least significant bit first.
//!
//! The word layout is Arrow's validity and boolean layout on a little-endian machine, so a
//! snapshot can hand the words to Arrow as bytes without converting them.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: usize,
}

impl Bitmap {
    pub fn new() -> Self {
        Self::default()
    }

    /// `len` bits, all set to `value`.
    pub fn filled(len: usize, value: bool) -> Self {
        let fill = if value { u64::MAX } else { 0 };
        Bitmap { words: vec![fill; len.div_ceil(64)], len }
    }

    pub fn with_capacity(bits: usize) -> Self {
        Bitmap { words: Vec::with_capacity(bits.div_ceil(64)), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        debug_assert!(i < self.len);
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    #[inline]
    pub fn set(&mut self, i: usize, value: bool) {
        debug_assert!(i < self.len);
        let mask = 1u64 << (i % 64);
        if value {
            self.words[i / 64] |= mask;
        } else {
            self.words[i / 64] &= !mask;
        }
    }

    pub fn push(&mut self, value: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
        self.set(self.len - 1, value);
    }

    /// Number of set bits among the first `len` bits.
    pub fn count_ones(&self) -> usize {
        let full = self.len / 64;
        let mut n: usize = self.words[..full].iter().map(|w| w.count_ones() as usize).sum();
        if !self.len.is_multiple_of(64) {
            let mask = (1u64 << (self.len % 64)) - 1;
            n += (self.words[full] & mask).count_ones() as usize;
        }
        n
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The bits as little-endian bytes (Arrow's bit order).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: u64 has no padding and any byte pattern is a valid u8; the slice covers
        // exactly the words' memory and borrows `self`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.words.len() * 8) }
    }

    /// Iterates over the indices of set bits.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        let len = self.len;
        self.words.iter().enumerate().flat_map(move |(wi, &w)| {
            let mut word = w;
            std::iter::from_fn(move || {
                if word == 0 {
                    return None;
                }
                let bit = word.trailing_zeros() as usize;
                word &= word - 1;
                Some(wi * 64 + bit)
            })
            .take_while(move |&i| i < len)
        })
    }

    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_get_set_count() {
        let mut b = Bitmap::new();
        for i in 0..130 {
            b.push(i % 3 == 0);
        }
        assert_eq!(b.len(), 130);
        assert!(b.get(129));
        assert!(!b.get(128));
        assert_eq!(b.count_ones(), 44);
        b.set(128, true);
        assert_eq!(b.count_ones(), 45);
        assert_eq!(b.iter_ones().filter(|i| *i >= 127).collect::<Vec<_>>(), vec![128, 129]);
        assert_eq!(b.as_bytes()[0], 0b0100_1001);
    }

    #[test]
    fn filled_ignores_bits_past_len() {
        let b = Bitmap::filled(70, true);
        assert_eq!(b.count_ones(), 70);
        assert_eq!(b.iter_ones().count(), 70);
    }
}
