//! Each chunk key's slot in a vector segment. Keys are the store's row ids, handed out in
//! order, so a database's keys mostly lie in a dense run: there the slots are an array indexed
//! by the key less the run's first (4 bytes a key, one read a lookup, and keys read in order
//! read the array in order). A filtered search looks up every key its filter passes, so this
//! lookup is what a filter passing 10% of a million vectors costs: in a hash map each one is a
//! cache and TLB miss among 19 MB of buckets. Where a database's keys are sparse (its rows spread
//! thin among other databases'), a hash map, so memory stays proportional to the keys held.

use engram_store::ChunkKey;

/// The array is kept while its span holds at least one key in this many.
const DENSITY: usize = 4;
/// ... give or take this many entries (small segments stay arrays whatever their spread).
const SLACK: usize = 4_096;
/// A sparse map checks whether its keys became dense whenever its size reaches a power of two
/// at least this large.
const RECHECK_MIN: usize = 1_024;

const NONE: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) enum SlotMap {
    Dense {
        /// The key of `slots[0]`.
        base: i64,
        /// Per key from `base`: its slot, or [`NONE`].
        slots: Vec<u32>,
        len: usize,
    },
    Sparse(rustc_hash::FxHashMap<ChunkKey, usize>),
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap::Dense {
            base: 0,
            slots: Vec::new(),
            len: 0,
        }
    }
}

fn fits(span: usize, len: usize) -> bool {
    span <= len.saturating_mul(DENSITY).saturating_add(SLACK)
}

impl SlotMap {
    pub(crate) fn get(&self, key: ChunkKey) -> Option<usize> {
        match self {
            SlotMap::Dense { base, slots, .. } => {
                let at = usize::try_from(key.0.checked_sub(*base)?).ok()?;
                slots
                    .get(at)
                    .filter(|slot| **slot != NONE)
                    .map(|slot| *slot as usize)
            }
            SlotMap::Sparse(map) => map.get(&key).copied(),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            SlotMap::Dense { len, .. } => *len,
            SlotMap::Sparse(map) => map.len(),
        }
    }

    /// Sets a key's slot (the key may hold one already).
    pub(crate) fn insert(&mut self, key: ChunkKey, slot: usize) {
        let slot32 = u32::try_from(slot).ok().filter(|s| *s != NONE);
        match (&mut *self, slot32) {
            (SlotMap::Dense { base, slots, len }, Some(slot32)) => {
                if *len == 0 {
                    slots.clear();
                    *base = key.0;
                }
                let end = base.saturating_add(slots.len() as i64);
                let (low, high) = ((*base).min(key.0), end.max(key.0.saturating_add(1)));
                let span = usize::try_from(high.saturating_sub(low)).unwrap_or(usize::MAX);
                if !fits(span, *len + 1) {
                    self.make_sparse();
                    self.insert(key, slot);
                    return;
                }
                if key.0 < *base {
                    // Room below as well, as much as is held (if it fits), so keys arriving
                    // in falling order move the array a logarithmic number of times.
                    let needed = (*base - key.0) as usize;
                    let below =
                        usize::try_from(key.0.saturating_sub(i64::MIN)).unwrap_or(usize::MAX);
                    let room = (*len).min(below);
                    let grow = if fits(slots.len() + needed + room, *len + 1) {
                        needed + room
                    } else {
                        needed
                    };
                    slots.splice(0..0, std::iter::repeat_n(NONE, grow));
                    *base -= grow as i64;
                }
                let at = (key.0 - *base) as usize;
                if at >= slots.len() {
                    slots.resize(at + 1, NONE);
                }
                if slots[at] == NONE {
                    *len += 1;
                }
                slots[at] = slot32;
            }
            (SlotMap::Dense { .. }, None) => {
                self.make_sparse();
                self.insert(key, slot);
            }
            (SlotMap::Sparse(map), _) => {
                map.insert(key, slot);
                let n = map.len();
                if n >= RECHECK_MIN && n.is_power_of_two() {
                    self.make_dense_if_fits();
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: ChunkKey) -> Option<usize> {
        match self {
            SlotMap::Dense { base, slots, len } => {
                let at = usize::try_from(key.0.checked_sub(*base)?).ok()?;
                let entry = slots.get_mut(at).filter(|slot| **slot != NONE)?;
                let slot = *entry as usize;
                *entry = NONE;
                *len -= 1;
                // Trailing holes go, so the span follows what is held at the end.
                while slots.last() == Some(&NONE) {
                    slots.pop();
                }
                if *len == 0 {
                    slots.clear();
                } else if !fits(slots.len(), *len) {
                    self.make_sparse();
                }
                Some(slot)
            }
            SlotMap::Sparse(map) => map.remove(&key),
        }
    }

    fn entries(&self) -> Vec<(ChunkKey, usize)> {
        match self {
            SlotMap::Dense { base, slots, .. } => slots
                .iter()
                .enumerate()
                .filter(|(_, slot)| **slot != NONE)
                .map(|(at, slot)| (ChunkKey(base + at as i64), *slot as usize))
                .collect(),
            SlotMap::Sparse(map) => map.iter().map(|(k, s)| (*k, *s)).collect(),
        }
    }

    fn make_sparse(&mut self) {
        *self = SlotMap::Sparse(self.entries().into_iter().collect());
    }

    fn make_dense_if_fits(&mut self) {
        let SlotMap::Sparse(map) = &*self else {
            return;
        };
        let (Some(low), Some(high)) = (map.keys().min(), map.keys().max()) else {
            return;
        };
        let span = usize::try_from(high.0.saturating_sub(low.0)).unwrap_or(usize::MAX);
        if span == usize::MAX || !fits(span + 1, map.len()) {
            return;
        }
        // A slot an array cannot hold: too large, or its hole marker.
        if map
            .values()
            .any(|slot| u32::try_from(*slot).map_or(true, |s| s == NONE))
        {
            return;
        }
        let mut slots = vec![NONE; span + 1];
        for (key, slot) in map {
            slots[(key.0 - low.0) as usize] = *slot as u32;
        }
        *self = SlotMap::Dense {
            base: low.0,
            len: map.len(),
            slots,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Against a hash map, through dense runs, keys arriving backwards, a far key that makes
    /// the keys sparse, removals that make them dense again, and emptying.
    #[test]
    fn answers_as_a_hash_map_does_whatever_the_keys_spread() {
        let mut map = SlotMap::default();
        let mut reference: HashMap<ChunkKey, usize> = HashMap::new();
        let check = |map: &SlotMap, reference: &HashMap<ChunkKey, usize>| {
            assert_eq!(map.len(), reference.len());
            for (key, slot) in reference {
                assert_eq!(map.get(*key), Some(*slot), "{key:?}");
            }
            for absent in [-5, 0, 999_999, 7_000_001, i64::MAX, i64::MIN] {
                let key = ChunkKey(absent);
                assert_eq!(map.get(key), reference.get(&key).copied());
            }
        };
        let put = |map: &mut SlotMap, reference: &mut HashMap<ChunkKey, usize>, k: i64, s| {
            map.insert(ChunkKey(k), s);
            reference.insert(ChunkKey(k), s);
        };
        for k in 1_000..6_000 {
            put(&mut map, &mut reference, k, (k - 1_000) as usize);
        }
        assert!(matches!(map, SlotMap::Dense { .. }));
        check(&map, &reference);
        for k in (900..1_000).rev() {
            put(&mut map, &mut reference, k, k as usize);
        }
        put(&mut map, &mut reference, 2_000, 77);
        assert!(matches!(map, SlotMap::Dense { .. }));
        check(&map, &reference);
        // A key far away: an array would span ten million entries for 5,101 keys.
        put(&mut map, &mut reference, 10_000_000, 5);
        assert!(matches!(map, SlotMap::Sparse(_)));
        check(&map, &reference);
        assert_eq!(map.remove(ChunkKey(10_000_000)), Some(5));
        reference.remove(&ChunkKey(10_000_000));
        assert_eq!(map.remove(ChunkKey(10_000_000)), None);
        // Dense again once it grows to a power of two.
        for k in 6_000..(6_000 + 8_192 - 5_100) {
            put(&mut map, &mut reference, k, k as usize);
        }
        assert!(matches!(map, SlotMap::Dense { .. }), "{}", map.len());
        check(&map, &reference);
        // Removals from the end shrink the span; from the middle leave holes.
        for k in (3_000..10_000).rev() {
            assert_eq!(map.remove(ChunkKey(k)), reference.remove(&ChunkKey(k)));
        }
        check(&map, &reference);
        let keys: Vec<ChunkKey> = reference.keys().copied().collect();
        for k in keys {
            assert_eq!(map.remove(k), reference.remove(&k));
        }
        assert_eq!(map.len(), 0);
        put(&mut map, &mut reference, -40, 3);
        check(&map, &reference);
    }

    /// Keys in falling order stay in an array and it moves a few times, not once a key.
    #[test]
    fn falling_keys_stay_dense() {
        let mut map = SlotMap::default();
        for (slot, k) in (0..100_000i64).rev().enumerate() {
            map.insert(ChunkKey(k), slot);
        }
        let SlotMap::Dense { slots, len, .. } = &map else {
            panic!("sparse");
        };
        assert_eq!(*len, 100_000);
        assert!(slots.len() < 2 * 100_000 + SLACK);
        for k in [0, 1, 50_000, 99_999] {
            assert_eq!(map.get(ChunkKey(k)), Some(99_999 - k as usize));
        }
        assert_eq!(map.get(ChunkKey(-1)), None);
    }
}
