//! Indexes of a table partition: the primary key as a hash index, every other index ordered.
//!
//! Both map an order-preserving byte encoding of the key columns ([`KeyBuf`]) to a [`RowId`].
//! The encoding compares bytewise as the values compare in SQL (strings in byte order, the "C"
//! collation), and each column's encoding is self-delimiting, so the encoding of the first k
//! columns is a prefix of the full key: a lookup on a leading subset of an ordered index's
//! columns is a range scan over that prefix.
//!
//! Every entry is a (key, row) pair, so a key can map to several rows: old versions keep their
//! entries until no transaction can see them (see [`IndexStore`]). Uniqueness is therefore a
//! property the table checks against rows' newest versions, not one the index enforces; keys
//! containing NULL never conflict, as in PostgreSQL.
//!
//! An index is owned by its partition's executor thread, like the rows: no latches.

use std::collections::BTreeSet;
use std::ops::Bound;

use smallvec::SmallVec;

use super::keytable::KeyTable;
use super::RowId;
use crate::types::Value;

/// An encoded key. Most keys fit inline.
pub type KeyBuf = SmallVec<[u8; 32]>;

// NULL sorts after every value, so ascending index order is PostgreSQL's default
// ASC NULLS LAST and reverse order its DESC NULLS FIRST.
const VALUE_TAG: u8 = 0x01;
const NULL_TAG: u8 = 0xff;
// Integers take a tag that says their sign and length, then only their significant bytes:
// tags INT_ZERO - 1 - n (n = 8 … 0) are negative integers of n bytes, INT_ZERO + n
// (n = 0 … 8) non-negative ones. The tag orders integers of different lengths; the bytes,
// big-endian, order those of one length. TPC-C-like keys of four small integers take about
// ten bytes, so they stay inline in a `KeyBuf`.
const INT_ZERO: u8 = 0x0a;

/// Appends the order-preserving encoding of `v`. All integer types share one encoding, as do
/// dates and timestamps' underlying integers, so a key built from an int8 parameter finds an
/// int4 column's entry once the parameter is converted to the column's type.
pub fn encode_value(v: &Value, out: &mut KeyBuf) {
    match v {
        Value::Null => out.push(NULL_TAG),
        Value::Bool(b) => out.extend_from_slice(&[VALUE_TAG, *b as u8]),
        Value::Int16(_) | Value::Int32(_) | Value::Int64(_) | Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_) => {
            let i = match v {
                Value::Date(d) => *d as i64,
                Value::Timestamp(t) | Value::TimestampTz(t) => *t,
                other => other.as_i64().unwrap_or(0),
            };
            encode_int(i, out);
        }
        Value::Float32(f) => encode_f64(*f as f64, out),
        Value::Float64(f) => encode_f64(*f, out),
        Value::Decimal(d) => {
            out.push(VALUE_TAG);
            out.extend_from_slice(&((d.value as u128) ^ (1 << 127)).to_be_bytes());
        }
        Value::Text(s) => {
            // Text never contains NUL (rejected on input), so 0x00 terminates it.
            out.push(VALUE_TAG);
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
    }
}

fn encode_int(i: i64, out: &mut KeyBuf) {
    // For a negative integer, its complement (non-negative) decides the length; the bytes
    // kept are the low bytes of the integer itself, which increase with it at that length.
    let magnitude = if i < 0 { !i as u64 } else { i as u64 };
    let n = (64 - magnitude.leading_zeros() as usize).div_ceil(8);
    let tag = if i < 0 { INT_ZERO - 1 - n as u8 } else { INT_ZERO + n as u8 };
    // The tag, then the integer's n low bytes big-endian, written as nine fixed bytes (two
    // stores, no call of `memcpy` for a copy of variable length) of which n + 1 are kept.
    let mut buf = [0u8; 9];
    buf[0] = tag;
    let kept = if n == 0 { 0 } else { (i as u64) << (8 * (8 - n)) };
    buf[1..].copy_from_slice(&kept.to_be_bytes());
    append_fixed(out, &buf, n + 1);
}

/// Appends the first `n` bytes of `bytes` (`n` ≤ 9) to `out`, storing all nine.
#[inline]
fn append_fixed(out: &mut KeyBuf, bytes: &[u8; 9], n: usize) {
    debug_assert!(n <= bytes.len());
    let len = out.len();
    out.reserve(bytes.len());
    // SAFETY: `reserve` made room for nine bytes past `len`; all nine are written before the
    // length grows by `n` ≤ 9, so every byte below the new length is initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().add(len), bytes.len());
        out.set_len(len + n);
    }
}

fn encode_f64(f: f64, out: &mut KeyBuf) {
    // -0.0 and 0.0 are equal in SQL; all NaNs are one value, above everything.
    let f = if f == 0.0 { 0.0 } else if f.is_nan() { f64::NAN } else { f };
    let bits = f.to_bits();
    let ordered = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
    out.push(VALUE_TAG);
    out.extend_from_slice(&ordered.to_be_bytes());
}

/// Encodes a whole key; returns whether it contains a NULL.
pub fn encode_key<'a>(values: impl IntoIterator<Item = &'a Value>, out: &mut KeyBuf) -> bool {
    let mut has_null = false;
    for v in values {
        has_null |= v.is_null();
        encode_value(v, out);
    }
    has_null
}

/// An entry of an ordered index: the key followed by the big-endian row id, ordered as that
/// byte string is (bytewise, shorter first on a common prefix). An entry of up to
/// [`SHORT`] bytes (a key of up to 16: TPC-C's take about ten) is held as three big-endian
/// words, zero-padded, and its length: two entries compare in three word comparisons and a
/// length comparison, with no loop and no call, and an entry takes 32 bytes. Longer entries
/// keep their bytes on the heap.
///
/// Zero padding keeps byte order: where two padded entries first differ, the shorter one
/// has a padding zero against a byte of the longer one that is not zero, or both have real
/// bytes; if they never differ, one is a prefix of the other, and the length decides.
/// INVARIANT: an entry of at most [`SHORT`] bytes is always `Short`, so equal entries have
/// equal representations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Short { words: [u64; 3], len: u8 },
    Long(Box<[u8]>),
}

/// The longest entry held in words.
const SHORT: usize = 24;

impl Entry {
    /// The entry of the byte string `bytes` (a whole entry, or a bound for a range scan).
    fn of_bytes(bytes: &[u8]) -> Entry {
        if bytes.len() > SHORT {
            return Entry::Long(bytes.into());
        }
        let mut buf = [0u8; SHORT];
        buf[..bytes.len()].copy_from_slice(bytes);
        Entry::short(&buf, bytes.len())
    }

    fn short(buf: &[u8; SHORT], len: usize) -> Entry {
        let word = |i: usize| u64::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3], buf[i + 4], buf[i + 5], buf[i + 6], buf[i + 7]]);
        Entry::Short { words: [word(0), word(8), word(16)], len: len as u8 }
    }

    /// The entry of (key, row).
    fn new(key: &[u8], row: RowId) -> Entry {
        let len = key.len() + 8;
        if len > SHORT {
            let mut bytes = Vec::with_capacity(len);
            bytes.extend_from_slice(key);
            bytes.extend_from_slice(&row.0.to_be_bytes());
            return Entry::Long(bytes.into_boxed_slice());
        }
        let mut buf = [0u8; SHORT];
        buf[..key.len()].copy_from_slice(key);
        buf[key.len()..len].copy_from_slice(&row.0.to_be_bytes());
        Entry::short(&buf, len)
    }

    /// The entry's bytes (a short entry's written out into `buf`).
    #[inline]
    fn bytes<'a>(&'a self, buf: &'a mut [u8; SHORT]) -> &'a [u8] {
        match self {
            Entry::Short { words, len } => {
                for (i, w) in words.iter().enumerate() {
                    buf[i * 8..i * 8 + 8].copy_from_slice(&w.to_be_bytes());
                }
                &buf[..*len as usize]
            }
            Entry::Long(b) => b,
        }
    }
}

impl Ord for Entry {
    /// Inlined into the B-tree's search, which compares a node's keys in turn: two short
    /// entries (nearly every entry of integer keys) compare in a few instructions there; a
    /// long one takes the call.
    #[inline(always)]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (Entry::Short { words: a, len: m }, Entry::Short { words: b, len: n }) => {
                if a[0] != b[0] {
                    a[0].cmp(&b[0])
                } else if a[1] != b[1] {
                    a[1].cmp(&b[1])
                } else if a[2] != b[2] {
                    a[2].cmp(&b[2])
                } else {
                    m.cmp(n)
                }
            }
            _ => self.cmp_long(other),
        }
    }
}

impl Entry {
    /// [`Ord::cmp`] when either entry is long: both written out as bytes.
    #[inline(never)]
    fn cmp_long(&self, other: &Self) -> std::cmp::Ordering {
        let (mut x, mut y) = ([0u8; SHORT], [0u8; SHORT]);
        compare_bytes(self.bytes(&mut x), other.bytes(&mut y))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// `a.cmp(b)` for byte strings, comparing eight bytes at a time as big-endian integers.
#[inline]
fn compare_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (p, q) in (&mut x).zip(&mut y) {
        let (p, q) = (u64::from_be_bytes(p.try_into().unwrap_or_default()), u64::from_be_bytes(q.try_into().unwrap_or_default()));
        if p != q {
            return p.cmp(&q);
        }
    }
    for (p, q) in x.remainder().iter().zip(y.remainder()) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// `a == b` for short byte strings, inline (a slice comparison calls `memcmp`).
#[inline]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && compare_bytes(a, b) == std::cmp::Ordering::Equal
}

/// Calls `f` with the key and row of an entry; false if `f` says to stop.
#[inline]
fn visit_entry(entry: &Entry, f: &mut dyn FnMut(&[u8], RowId) -> bool) -> bool {
    let mut buf = [0u8; SHORT];
    let bytes = entry.bytes(&mut buf);
    let (key, row) = bytes.split_at(bytes.len() - 8);
    f(key, RowId(u64::from_be_bytes(row.try_into().unwrap_or_default())))
}

/// An index of a table partition: a set of (key, row) entries.
///
/// An entry means that some version of the row that a transaction may still see has that key.
/// Entries are added when a version with a new key appears (insert, or an update of a key
/// column) and removed when no transaction can see a version with that key any more (rollback
/// of the change, or garbage collection of old versions). So a key may map to several rows
/// even in a unique index — a deleted or re-keyed row keeps its old entry for older readers —
/// and uniqueness is checked by the table against the rows' newest versions.
#[derive(Debug)]
pub enum IndexStore {
    /// A primary key of one column: whole-key lookups only.
    Hash(HashIndex),
    /// A primary key of several columns: the hash table answers whole keys; the ordered set
    /// (entries as in `Ordered`) answers leading-column prefixes and ranges, in key order, as
    /// a composite primary key does in PostgreSQL (`WHERE w = $1 AND d = $2 ORDER BY o LIMIT 1`).
    HashOrdered(HashIndex, BTreeSet<Entry>),
    /// Secondary indexes: entries are the key followed by the big-endian row id.
    Ordered(BTreeSet<Entry>),
}

/// The primary-key index: one hash table of (key, row) entries ([`KeyTable`]), a key with
/// several rows having one entry per row.
///
/// Entries are 32-byte slots, the key inline up to 16 bytes (every key of integer columns up
/// to four columns wide, and short strings). Growing the table moves every entry into new
/// memory, and at millions of keys the partition stalls while the kernel supplies and zeroes
/// that memory, so the stall and the memory scale with the entry size.
/// Splitting the index into 16 or 64 tables that grow one at a time bounded the stall
/// further but cost more throughput than the stall does (ARCHITECTURE.md has the numbers).
#[derive(Debug, Default)]
pub struct HashIndex {
    table: KeyTable,
}

impl HashIndex {
    fn new() -> Self {
        Self::default()
    }

    fn rows<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = RowId> + 'a {
        self.table.rows(key)
    }

    fn insert(&mut self, key: &[u8], row: RowId) -> bool {
        self.table.insert(key, row)
    }

    fn remove(&mut self, key: &[u8], row: RowId) {
        self.table.remove(key, row)
    }

    fn reserve(&mut self, n: usize) {
        self.table.reserve(n)
    }
}

impl IndexStore {
    pub fn new_hash() -> Self {
        IndexStore::Hash(HashIndex::new())
    }

    pub fn new_ordered() -> Self {
        IndexStore::Ordered(BTreeSet::new())
    }

    pub fn new_hash_ordered() -> Self {
        IndexStore::HashOrdered(HashIndex::new(), BTreeSet::new())
    }

    /// Whether whole keys are looked up in a hash table (a primary key).
    pub fn has_hash(&self) -> bool {
        !matches!(self, IndexStore::Ordered(_))
    }

    /// Whether the index answers prefixes and ranges of its key, in key order.
    pub fn is_ordered(&self) -> bool {
        !matches!(self, IndexStore::Hash(_))
    }

    fn tree(&self) -> Option<&BTreeSet<Entry>> {
        match self {
            IndexStore::Hash(_) => None,
            IndexStore::Ordered(o) | IndexStore::HashOrdered(_, o) => Some(o),
        }
    }

    /// Makes room for `n` more keys where the structure can.
    pub fn reserve(&mut self, n: usize) {
        if let IndexStore::Hash(h) | IndexStore::HashOrdered(h, _) = self {
            h.reserve(n);
        }
    }

    /// Adds the entry (key, row); returns false if it was already there.
    pub fn insert(&mut self, key: &[u8], row: RowId) -> bool {
        match self {
            IndexStore::Hash(h) => h.insert(key, row),
            IndexStore::Ordered(o) => o.insert(Entry::new(key, row)),
            IndexStore::HashOrdered(h, o) => h.insert(key, row) && o.insert(Entry::new(key, row)),
        }
    }

    /// Removes the entry (key, row) if present.
    pub fn remove(&mut self, key: &[u8], row: RowId) {
        match self {
            IndexStore::Hash(h) => h.remove(key, row),
            IndexStore::Ordered(o) => {
                o.remove(&Entry::new(key, row));
            }
            IndexStore::HashOrdered(h, o) => {
                h.remove(key, row);
                o.remove(&Entry::new(key, row));
            }
        }
    }

    /// Asks the processor for the memory a lookup of the whole key `key` reads first, where
    /// the index has a hash table (see [`KeyTable::prefetch`]); nothing otherwise.
    pub fn prefetch_key(&self, key: &[u8]) {
        if let IndexStore::Hash(h) | IndexStore::HashOrdered(h, _) = self {
            h.table.prefetch(key);
        }
    }

    /// Rows with an entry for the whole key `key`, until `f` returns false: a hash lookup
    /// where the index has a hash table.
    pub fn scan_key(&self, key: &[u8], f: &mut dyn FnMut(&[u8], RowId) -> bool) {
        match self {
            IndexStore::Hash(h) | IndexStore::HashOrdered(h, _) => {
                for r in h.rows(key) {
                    if !f(key, r) {
                        return;
                    }
                }
            }
            IndexStore::Ordered(_) => self.scan_prefix(key, f),
        }
    }

    /// Rows with an entry whose key starts with `prefix` (whole encoded columns), in key order,
    /// until `f` returns false. An index of one hash table answers whole keys only.
    pub fn scan_prefix(&self, prefix: &[u8], f: &mut dyn FnMut(&[u8], RowId) -> bool) {
        let Some(o) = self.tree() else { return self.scan_key(prefix, f) };
        for entry in o.range((Bound::Included(Entry::of_bytes(prefix)), Bound::Unbounded)) {
            let mut stop = false;
            visit_entry(entry, &mut |key, row| {
                stop = !key.starts_with(prefix) || !f(key, row);
                !stop
            });
            if stop {
                break;
            }
        }
    }

    /// Rows with keys between two bounds, in key order (or reverse order); nothing for an index
    /// of one hash table. Bounds are encoded key prefixes; an excluded upper bound excludes
    /// every key it prefixes.
    pub fn scan_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], RowId) -> bool,
    ) {
        let Some(o) = self.tree() else { return };
        // Entries extend the bound's prefix, so turn prefix bounds into bounds on whole
        // entries: "> p" means past every entry starting with p; "<= p" includes them.
        let lower_owned;
        let lower = match lower {
            Bound::Excluded(p) => {
                lower_owned = prefix_successor(p);
                match &lower_owned {
                    Some(s) => Bound::Included(s.as_slice()),
                    None => return,
                }
            }
            other => other,
        };
        let upper_owned;
        let upper = match upper {
            Bound::Included(p) => {
                upper_owned = prefix_successor(p);
                match &upper_owned {
                    Some(s) => Bound::Excluded(s.as_slice()),
                    None => Bound::Unbounded,
                }
            }
            other => other,
        };
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) = (lower, upper)
            && l >= u
        {
            return;
        }
        let bound = |b: Bound<&[u8]>| match b {
            Bound::Included(p) => Bound::Included(Entry::of_bytes(p)),
            Bound::Excluded(p) => Bound::Excluded(Entry::of_bytes(p)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let range = o.range((bound(lower), bound(upper)));
        if reverse {
            for entry in range.rev() {
                if !visit_entry(entry, f) {
                    break;
                }
            }
        } else {
            for entry in range {
                if !visit_entry(entry, f) {
                    break;
                }
            }
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            IndexStore::Hash(h) | IndexStore::HashOrdered(h, _) => h.table.len(),
            IndexStore::Ordered(o) => o.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The smallest byte string greater than every string starting with `prefix`.
fn prefix_successor(prefix: &[u8]) -> Option<KeyBuf> {
    let mut s = KeyBuf::from_slice(prefix);
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Decimal;

    fn key(values: &[Value]) -> KeyBuf {
        let mut k = KeyBuf::new();
        encode_key(values, &mut k);
        k
    }

    #[test]
    fn encoding_preserves_order() {
        let ordered = [
            vec![Value::Int64(i64::MIN)],
            vec![Value::Int32(-5)],
            vec![Value::Int16(0)],
            vec![Value::Int64(7)],
            vec![Value::Null],
        ];
        for w in ordered.windows(2) {
            assert!(key(&w[0]) < key(&w[1]), "{:?} < {:?}", w[0], w[1]);
        }
        let floats = [-1e300, -1.5, 0.0, 2.25, 1e300, f64::INFINITY, f64::NAN];
        for w in floats.windows(2) {
            assert!(key(&[Value::Float64(w[0])]) < key(&[Value::Float64(w[1])]));
        }
        assert!(key(&[Value::Decimal(Decimal::new(-100, 2))]) < key(&[Value::Decimal(Decimal::new(5, 2))]));
        // Composite keys: strings are self-delimiting, so ("a", 9) < ("ab", 1).
        assert!(
            key(&[Value::Text("a".into()), Value::Int32(9)])
                < key(&[Value::Text("ab".into()), Value::Int32(1)])
        );
        assert!(key(&[Value::Text("a".into())]).starts_with(&[VALUE_TAG, b'a', 0]));
    }

    #[test]
    fn integers_take_their_significant_bytes_and_keep_their_order() {
        let mut ints = vec![i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1, 0, 1, -1];
        for shift in 0..63 {
            let p = 1i64 << shift;
            ints.extend([p, p - 1, p + 1, -p, -p - 1, -p + 1]);
        }
        ints.sort_unstable();
        ints.dedup();
        for w in ints.windows(2) {
            assert!(key(&[Value::Int64(w[0])]) < key(&[Value::Int64(w[1])]), "{} < {}", w[0], w[1]);
        }
        assert!(key(&[Value::Int64(i64::MAX)]) < key(&[Value::Null]));
        assert_eq!(key(&[Value::Int32(0)]).len(), 1);
        assert_eq!(key(&[Value::Int32(255)]).len(), 2);
        assert_eq!(key(&[Value::Int32(-256)]).len(), 2);
        assert_eq!(key(&[Value::Int64(i64::MIN)]).len(), 9);
        // Self-delimiting: a composite key of small integers orders by its first column.
        assert!(key(&[Value::Int32(1), Value::Int32(70000)]) < key(&[Value::Int32(2), Value::Int32(0)]));
        assert!(key(&[Value::Int32(-1), Value::Int32(5)]) < key(&[Value::Int32(0), Value::Int32(-5)]));
        // One encoding for every integer type.
        assert_eq!(key(&[Value::Int16(7)]), key(&[Value::Int64(7)]));
    }

    #[test]
    fn entry_order_is_byte_order() {
        // Lengths around the eight-byte steps, equal prefixes, and bytes above 0x7f.
        // Trailing zero bytes (which a short entry's padding must not confuse with its end),
        // and lengths on both sides of a short entry's 24 bytes.
        let mut strings: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0, 0], vec![3, 0], vec![3, 0, 0]];
        for len in [1usize, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31] {
            for seed in 0u8..6 {
                strings.push((0..len).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed.wrapping_mul(61))).collect());
                strings.push((0..len).map(|i| if i + 1 == len { 0x80 + seed } else { 3 }).collect());
                strings.push((0..len).map(|i| if i + 1 == len { seed } else { 3 }).collect());
            }
        }
        for a in &strings {
            for b in &strings {
                let want = a.as_slice().cmp(b.as_slice());
                assert_eq!(compare_bytes(a, b), want, "{a:?} against {b:?}");
                let (x, y) = (Entry::of_bytes(a), Entry::of_bytes(b));
                assert_eq!(x.cmp(&y), want, "entries {a:?} against {b:?}");
                assert_eq!(x == y, a == b);
                let mut buf = [0u8; SHORT];
                assert_eq!(x.bytes(&mut buf), a.as_slice());
            }
        }
        // (key, row) entries order by key, then row.
        let k = key(&[Value::Int32(5), Value::Int32(7)]);
        assert!(Entry::new(&k, RowId(1)) < Entry::new(&k, RowId(2)));
        assert!(Entry::new(&k, RowId(u64::MAX)) < Entry::new(&key(&[Value::Int32(5), Value::Int32(8)]), RowId(0)));
    }

    #[test]
    fn entries_are_key_and_row() {
        // A short key is stored inline in a hash entry, a long one on the heap.
        let long = || Value::Text("a key longer than any inline key".into());
        for (k, other) in [
            (key(&[Value::Int32(1)]), key(&[Value::Int32(2)])),
            (key(&[Value::Int32(1), long()]), key(&[Value::Int32(2), long()])),
        ] {
            for mut idx in [IndexStore::new_hash(), IndexStore::new_ordered(), IndexStore::new_hash_ordered()] {
                assert!(idx.insert(&k, RowId(1)));
                assert!(!idx.insert(&k, RowId(1)));
                assert!(idx.insert(&k, RowId(2)), "a key may map to several rows");
                assert!(idx.insert(&other, RowId(3)));
                for by_key in [false, true] {
                    let mut rows = vec![];
                    let mut f = |key: &[u8], r: RowId| {
                        assert_eq!(key, k.as_slice());
                        rows.push(r.0);
                        true
                    };
                    if by_key { idx.scan_key(&k, &mut f) } else { idx.scan_prefix(&k, &mut f) }
                    rows.sort();
                    assert_eq!(rows, vec![1, 2]);
                }
                idx.remove(&k, RowId(1));
                idx.remove(&other, RowId(1));
                assert_eq!(idx.len(), 2, "only the entry of that key and row goes");
            }
        }
    }

    #[test]
    fn prefix_and_range_scans() {
        for idx in [IndexStore::new_ordered(), IndexStore::new_hash_ordered()] {
            prefix_and_range_scans_of(idx);
        }
        let mut hash = IndexStore::new_hash();
        let k = key(&[Value::Int32(1), Value::Int32(1)]);
        hash.insert(&k, RowId(0));
        let mut rows = 0;
        hash.scan_range(Bound::Included(&k), Bound::Included(&k), false, &mut |_, _| {
            rows += 1;
            true
        });
        assert_eq!(rows, 0, "a lone hash table answers no ranges");
    }

    fn prefix_and_range_scans_of(mut idx: IndexStore) {
        assert!(idx.is_ordered());
        for (i, (a, b)) in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)].iter().enumerate() {
            let k = key(&[Value::Int32(*a), Value::Int32(*b)]);
            idx.insert(&k, RowId(i as u64));
        }
        let mut rows = vec![];
        idx.scan_prefix(&key(&[Value::Int32(1)]), &mut |_, r| {
            rows.push(r.0);
            true
        });
        assert_eq!(rows, vec![0, 1, 2]);
        let (lo, hi) = (key(&[Value::Int32(1), Value::Int32(2)]), key(&[Value::Int32(2), Value::Int32(1)]));
        let mut rows = vec![];
        idx.scan_range(Bound::Excluded(&lo), Bound::Included(&hi), false, &mut |_, r| {
            rows.push(r.0);
            true
        });
        assert_eq!(rows, vec![2, 3]);
        let mut rows = vec![];
        idx.scan_range(Bound::Included(&key(&[Value::Int32(1)])), Bound::Included(&key(&[Value::Int32(1)])), true, &mut |_, r| {
            rows.push(r.0);
            rows.len() < 2
        });
        assert_eq!(rows, vec![2, 1]);
    }
}
