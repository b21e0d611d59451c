//! Compiles a [`PlanFile`] into the tables replay reads without locks or hashing on the
//! allocation path.
//!
//! - Scope nodes are renumbered so that the `k`-th same-named child of a scope is
//!   `base + k`: entering an op costs one hash lookup of `(parent, name)`.
//! - Each node owns a contiguous range of slots indexed by ordinal (`slot_ranges`); a slab
//!   instance keeps a cursor per node over that range, so an allocation's slot is the
//!   cursor's next one.
//! - Planned slots are grouped by start offset (*address groups*, sorted by offset). At most
//!   one slot per group can be live, so an instance keeps one occupant word per group.
//!   Slot `i` may be handed out when every group starting inside its range
//!   (`group..group_end`) is empty and no occupant of its group's *cover list* (groups
//!   starting below it whose slots reach above its start) extends past its start.
//! - A free finds its group by offset through an open-addressing table.

use crate::hash::name_hash;
use crate::trace::PlanFile;

/// Slot flag: planned into the slab.
pub(crate) const PLANNED: u8 = 1;
/// Slot flag: the allocation escaped the profiled pass.
pub(crate) const ESCAPING: u8 = 2;

/// One allocation key's slot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slot {
    pub(crate) offset: u64,
    pub(crate) size: u64,
    /// Largest alignment the slot's address is guaranteed to have (its offset's, capped
    /// at the slab base alignment).
    pub(crate) max_align: u64,
    pub(crate) group: u32,
    pub(crate) group_end: u32,
    /// The group's cover list: `cover[cover_start..cover_end]`.
    pub(crate) cover_start: u32,
    pub(crate) cover_end: u32,
    pub(crate) flags: u8,
}

#[derive(Clone, Debug, Default)]
struct ScopeGroup {
    hash: u64,
    parent: u32,
    name: Box<str>,
    base: u32,
    count: u32,
}

/// Alignment of every slab base.
pub(crate) const SLAB_ALIGN: u64 = crate::region::CHUNK as u64;

/// Replay tables of one plan.
#[derive(Debug)]
pub(crate) struct CompiledPlan {
    pub(crate) key: Box<str>,
    pub(crate) height: u64,
    nodes: u32,
    scope_groups: Vec<ScopeGroup>,
    slot_ranges: Vec<(u32, u32)>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) group_offsets: Vec<u64>,
    cover: Vec<u32>,
    offset_table: Vec<(u64, u32)>,
}

impl CompiledPlan {
    /// Builds the tables; rejects inconsistent documents.
    pub(crate) fn compile(file: &PlanFile) -> Result<CompiledPlan, String> {
        file.check()?;
        let n_scopes = file.scopes.len();
        // Group scopes by (parent, name) in order of first appearance.
        let mut group_of_scope = vec![u32::MAX; n_scopes];
        let mut groups: Vec<(u32, &str, u32)> = Vec::new(); // (orig parent, name, max occ)
        let mut lookup: std::collections::HashMap<(u32, &str), u32> = Default::default();
        for s in file.scopes.iter().skip(1) {
            let parent = s.parent.unwrap_or(0);
            let g = *lookup.entry((parent, s.name.as_str())).or_insert_with(|| {
                groups.push((parent, s.name.as_str(), 0));
                groups.len() as u32 - 1
            });
            let e = &mut groups[g as usize];
            e.2 = e.2.max(s.occurrence);
            group_of_scope[s.id as usize] = g;
        }
        let mut base = Vec::with_capacity(groups.len());
        let mut next = 1u32;
        for &(_, _, max_occ) in &groups {
            base.push(next);
            next = next.checked_add(max_occ + 1).ok_or("too many scopes")?;
        }
        let nodes = next;
        let mut new_id = vec![0u32; n_scopes];
        let mut taken = vec![false; nodes as usize];
        for s in file.scopes.iter().skip(1) {
            let id = base[group_of_scope[s.id as usize] as usize] + s.occurrence;
            if std::mem::replace(&mut taken[id as usize], true) {
                return Err(format!(
                    "scope {} repeats its parent, name and occurrence",
                    s.id
                ));
            }
            new_id[s.id as usize] = id;
        }
        // Scope group hash table, keyed by (new parent id, name).
        let cap = (groups.len() * 2).next_power_of_two().max(8);
        let mut scope_groups = vec![ScopeGroup::default(); cap];
        for (g, &(parent, name, max_occ)) in groups.iter().enumerate() {
            let parent = new_id[parent as usize];
            let hash = name_hash(parent, name);
            let mut i = hash as usize & (cap - 1);
            while scope_groups[i].count != 0 {
                i = (i + 1) & (cap - 1);
            }
            scope_groups[i] = ScopeGroup {
                hash,
                parent,
                name: name.into(),
                base: base[g],
                count: max_occ + 1,
            };
        }
        // Slots per node.
        let mut slot_count = vec![0u32; nodes as usize];
        for s in &file.slots {
            let node = new_id[s.scope as usize] as usize;
            slot_count[node] = slot_count[node].max(s.ordinal.saturating_add(1));
        }
        let mut slot_base = Vec::with_capacity(nodes as usize);
        let mut total = 0u64;
        for &c in &slot_count {
            slot_base.push(total as u32);
            total += c as u64;
            if total > u32::MAX as u64 / 2 {
                return Err("too many slots".into());
            }
        }
        let mut slots = vec![Slot::default(); total as usize];
        for s in &file.slots {
            let node = new_id[s.scope as usize] as usize;
            let slot = &mut slots[(slot_base[node] + s.ordinal) as usize];
            if slot.flags != 0 {
                return Err(format!(
                    "two slots for scope {} ordinal {}",
                    s.scope, s.ordinal
                ));
            }
            slot.size = s.size;
            match s.offset {
                Some(o) => {
                    slot.offset = o;
                    slot.max_align = if o == 0 {
                        SLAB_ALIGN
                    } else {
                        (1u64 << o.trailing_zeros()).min(SLAB_ALIGN)
                    };
                    slot.flags = PLANNED;
                }
                None => {
                    slot.flags = ESCAPING;
                }
            }
        }
        // Address groups.
        let mut group_offsets: Vec<u64> = slots
            .iter()
            .filter(|s| s.flags == PLANNED)
            .map(|s| s.offset)
            .collect();
        group_offsets.sort_unstable();
        group_offsets.dedup();
        let mut group_max_end = vec![0u64; group_offsets.len()];
        for s in slots.iter_mut().filter(|s| s.flags == PLANNED) {
            let g = group_offsets.partition_point(|&o| o < s.offset);
            let end = s.offset + s.size;
            s.group = g as u32;
            s.group_end = group_offsets.partition_point(|&o| o < end) as u32;
            group_max_end[g] = group_max_end[g].max(end);
        }
        // Cover lists: groups below `g` whose furthest slot end passes `g`'s offset.
        let mut cover_start = Vec::with_capacity(group_offsets.len() + 1);
        let mut cover = Vec::new();
        let mut active: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>> =
            Default::default();
        for (g, &off) in group_offsets.iter().enumerate() {
            while active.peek().is_some_and(|r| r.0 .0 <= off) {
                active.pop();
            }
            cover_start.push(cover.len() as u32);
            cover.extend(active.iter().map(|r| r.0 .1));
            active.push(std::cmp::Reverse((group_max_end[g], g as u32)));
        }
        cover_start.push(cover.len() as u32);
        for s in slots.iter_mut().filter(|s| s.flags == PLANNED) {
            s.cover_start = cover_start[s.group as usize];
            s.cover_end = cover_start[s.group as usize + 1];
        }
        // Offset -> group table for frees.
        let cap = (group_offsets.len() * 2).next_power_of_two().max(8);
        let mut offset_table = vec![(u64::MAX, 0u32); cap];
        for (g, &off) in group_offsets.iter().enumerate() {
            let mut i = offset_slot(off, cap);
            while offset_table[i].0 != u64::MAX {
                i = (i + 1) & (cap - 1);
            }
            offset_table[i] = (off, g as u32);
        }
        Ok(CompiledPlan {
            key: file.key.as_str().into(),
            height: file.height,
            nodes,
            scope_groups,
            slot_ranges: slot_base
                .iter()
                .zip(&slot_count)
                .map(|(&b, &c)| (b, b + c))
                .collect(),
            slots,
            group_offsets,
            cover,
            offset_table,
        })
    }

    /// Number of scope nodes (including the root, 0).
    pub(crate) fn nodes(&self) -> usize {
        self.nodes as usize
    }

    /// Number of address groups.
    pub(crate) fn groups(&self) -> usize {
        self.group_offsets.len()
    }

    /// The first node of the `(parent, name)` group and the group's size.
    #[inline]
    pub(crate) fn scope_group(&self, parent: u32, name: &str) -> Option<(u32, u32)> {
        let hash = name_hash(parent, name);
        let mask = self.scope_groups.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let g = &self.scope_groups[i];
            if g.count == 0 {
                return None;
            }
            if g.hash == hash && g.parent == parent && &*g.name == name {
                return Some((g.base, g.count));
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `(node, ordinal)`, if the plan has one.
    #[cfg(test)]
    pub(crate) fn slot_index(&self, node: u32, ordinal: u32) -> Option<u32> {
        let &(first, end) = self.slot_ranges.get(node as usize)?;
        (ordinal < end - first).then_some(first + ordinal)
    }

    /// The cover list of a planned slot.
    #[inline]
    pub(crate) fn cover_of_slot(&self, slot: &Slot) -> &[u32] {
        self.cover
            .get(slot.cover_start as usize..slot.cover_end as usize)
            .unwrap_or(&[])
    }

    /// Each node's slots as `(first, end)`: the cursors an instance starts a pass with.
    pub(crate) fn slot_ranges(&self) -> &[(u32, u32)] {
        &self.slot_ranges
    }

    /// The address group starting exactly at `offset`.
    #[inline]
    pub(crate) fn group_at(&self, offset: u64) -> Option<u32> {
        let cap = self.offset_table.len();
        let mut i = offset_slot(offset, cap);
        loop {
            let (o, g) = self.offset_table[i];
            if o == offset {
                return Some(g);
            }
            if o == u64::MAX {
                return None;
            }
            i = (i + 1) & (cap - 1);
        }
    }
}

#[inline]
fn offset_slot(offset: u64, cap: usize) -> usize {
    (offset.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & (cap - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT};

    fn scope(id: u32, parent: Option<u32>, name: &str, occurrence: u32) -> TraceScope {
        TraceScope {
            enter: None,
            exit: None,
            id,
            parent,
            name: name.into(),
            occurrence,
        }
    }

    fn slot(scope: u32, ordinal: u32, size: u64, offset: Option<u64>) -> PlanSlot {
        PlanSlot {
            scope,
            ordinal,
            size,
            align: 16,
            offset,
        }
    }

    fn file() -> PlanFile {
        PlanFile {
            format: PLAN_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "k".into(),
            strategy: "best".into(),
            height: 256,
            lower_bound: 256,
            naive: 400,
            scopes: vec![
                scope(0, None, "k", 0),
                scope(1, Some(0), "conv", 0),
                scope(2, Some(0), "relu", 0),
                scope(3, Some(0), "conv", 1),
                scope(4, Some(3), "im2col", 0),
            ],
            slots: vec![
                slot(0, 0, 256, Some(0)),
                slot(1, 0, 64, Some(0)),
                slot(1, 1, 64, Some(64)),
                slot(3, 0, 128, Some(128)),
                slot(4, 0, 16, None),
                slot(2, 2, 32, Some(160)),
            ],
        }
    }

    #[test]
    fn renumbers_sibling_occurrences_contiguously() {
        let c = CompiledPlan::compile(&file()).unwrap();
        let (conv, n) = c.scope_group(0, "conv").unwrap();
        assert_eq!(n, 2);
        assert!(c.scope_group(0, "pool").is_none());
        let (im2col, _) = c.scope_group(conv + 1, "im2col").unwrap();
        assert!(c.scope_group(conv, "im2col").is_none());
        let s = c.slot_index(im2col, 0).unwrap();
        assert_eq!(c.slots[s as usize].flags, ESCAPING);
        let (relu, _) = c.scope_group(0, "relu").unwrap();
        assert!(c
            .slot_index(relu, 0)
            .is_some_and(|s| c.slots[s as usize].flags == 0));
        assert!(c.slot_index(relu, 3).is_none());
        assert_eq!(c.slots.iter().filter(|s| s.flags == PLANNED).count(), 5);
    }

    #[test]
    fn address_groups_and_cover_lists() {
        let c = CompiledPlan::compile(&file()).unwrap();
        assert_eq!(c.group_offsets, vec![0, 64, 128, 160]);
        let root = &c.slots[c.slot_index(0, 0).unwrap() as usize];
        assert_eq!((root.group, root.group_end), (0, 4));
        // Group 160 is covered by group 0 (the 256-byte slot) and group 128 (128 bytes).
        let at_160 = c
            .slots
            .iter()
            .find(|s| s.flags == PLANNED && s.group == 3)
            .unwrap();
        let mut cover = c.cover_of_slot(at_160).to_vec();
        cover.sort_unstable();
        assert_eq!(cover, vec![0, 2]);
        for (g, &o) in c.group_offsets.iter().enumerate() {
            assert_eq!(c.group_at(o), Some(g as u32));
        }
        assert_eq!(c.group_at(8), None);
        assert_eq!(
            c.slots[c.slot_index(0, 0).unwrap() as usize].max_align,
            SLAB_ALIGN
        );
        let (relu, _) = c.scope_group(0, "relu").unwrap();
        assert_eq!(
            c.slots[c.slot_index(relu, 2).unwrap() as usize].max_align,
            32
        );
    }

    #[test]
    fn rejects_bad_documents() {
        let mut f = file();
        f.slots.push(slot(1, 0, 8, Some(0)));
        assert!(CompiledPlan::compile(&f).is_err());
        let mut f = file();
        f.slots[0].offset = Some(8);
        assert!(
            CompiledPlan::compile(&f).is_err(),
            "offset past height / misaligned"
        );
        let mut f = file();
        f.scopes.push(scope(5, Some(0), "conv", 1));
        assert!(CompiledPlan::compile(&f).is_err());
        let mut f = file();
        f.version = 99;
        assert!(CompiledPlan::compile(&f).is_err());
    }
}
