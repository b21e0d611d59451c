//! The profiling recorder: events of one pass on its thread, turned into a [`Profile`].
//!
//! Every method runs with the re-entrancy guard set, so its own allocations go to the
//! backend. Frees are paired with their allocation through a table keyed by the canonical
//! address of the live allocation, holding its full record index; the record's 16-bit tag
//! is the low half of that index. Because an address maps to at most one *live*
//! allocation, pairing stays exact when the backend reuses addresses and beyond 65,536
//! allocations.
//!
//! Requests small enough for the plan's lanes (see `replay`'s lanes) are counted, not
//! recorded, unless trace files are written: the table holds them under a lane entry (see
//! `lane_count.rs`), which keeps, per class, how many are live and the most that were,
//! and which of them escape. A pass whose allocations are mostly small records its large
//! ones only.

use crate::format::trace::{AllocKind, TraceScope, TraceUse};
use crate::profiling::lane_count::{LaneCount, LANE_MARK};
use crate::profiling::live_table::LiveTable;
use crate::profiling::profile::{align_log2, Profile, Record, FRAMES, LIVE, NONE};
use crate::profiling::tag::TaggedPtr;
use crate::stats::AbandonReason;
use crate::support::fallible::try_grow;
use crate::support::hash::FastMap;
use crate::support::sync::{LockId, SpinCell};

struct Scope {
    parent: u32,
    name: &'static str,
    occurrence: u32,
    /// Event time of the enter (0 for the pass).
    enter: u64,
    /// Event time of the exit; `LIVE` while open.
    exit: u64,
}

/// What the hot path appends: one event per call, processed later by `drain`.
#[derive(Clone, Copy)]
pub(crate) enum Event {
    Alloc {
        addr: usize,
        size: u64,
        scope: u32,
        site: u32,
        align: u32,
        zeroed: bool,
    },
    Free {
        addr: usize,
    },
    Realloc {
        old: usize,
        new: usize,
        size: u64,
        site: u32,
        align: u32,
    },
    Enter {
        node: u32,
    },
    Exit {
        node: u32,
    },
}

/// How much one profile may record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Events (allocations, frees, reallocs, op enters and exits).
    pub(crate) events: u64,
    /// Bytes of the recorder's own buffers.
    pub(crate) bytes: u64,
}

impl Bounds {
    /// The bounds `config` sets.
    pub(crate) fn of(config: &crate::config::Config) -> Bounds {
        Bounds {
            events: config.max_profile_events,
            bytes: config.max_profile_bytes,
        }
    }
}

/// A profile cannot go on: its bound was reached or its memory could not grow.
pub(crate) type Abandon = AbandonReason;

/// Records one profiled pass.
///
/// The calls made on the allocation path only append an [`Event`]; pairing frees with
/// their allocations, ordinals and event times are worked out by `drain`, at pass end or
/// when `observe` needs the live allocations. The result is the same as recording eagerly:
/// events are processed in order, and events that do not count (frees and reallocs of
/// allocations made before the pass) take no time.
///
/// Every method that records can fail, with [`AbandonReason::OutOfMemory`] when a buffer
/// cannot grow (the backend is out of memory: the recorder never aborts) or
/// [`AbandonReason::Bound`] past its [`Bounds`]; the pass then abandons the profile.
pub(crate) struct Recorder {
    key: &'static str,
    bounds: Bounds,
    /// Events recorded so far (drained or not).
    recorded: u64,
    events: Vec<Event>,
    time: u64,
    records: Vec<Record>,
    live: LiveTable,
    scopes: Vec<Scope>,
    scope_index: FastMap<(u32, &'static str, u32), u32>,
    occurrences: FastMap<(u32, &'static str), u32>,
    ordinals: Vec<u32>,
    uses: Vec<TraceUse>,
    frames: Option<Vec<usize>>,
    /// The requests counted for lanes, not recorded.
    lanes: LaneCount,
}

/// The recorder's lane bound under `config`: its lanes, unless trace files are written
/// (they hold every allocation).
pub(crate) fn counted_lanes(config: &crate::config::Config) -> u64 {
    if config.trace_dir.is_some() {
        0
    } else {
        config.lanes
    }
}

/// Buffers of finished recorders, reused by the next profiled passes: a profile's buffers
/// reach megabytes, and fresh ones would cost a page fault per 4 KiB on every profile.
/// Record buffers above [`SPARE_RECORDS`] records are not kept.
pub(crate) static SPARE: SpinCell<Vec<(Vec<Event>, Vec<Record>)>> =
    SpinCell::new(LockId::Spare, Vec::new());
/// Spare buffer pairs kept at most.
const SPARES: usize = 4;
/// A record buffer larger than this (in records: 3.5 MB) is freed, not kept spare: the
/// buffers of one large profile would otherwise stay for the process's lifetime.
const SPARE_RECORDS: usize = 1 << 16;
impl Recorder {
    /// A recorder for a pass of `key` that counts requests of at most `lanes` bytes
    /// instead of recording them; `None` when memory ran out.
    pub(crate) fn new(
        key: &'static str,
        backtrace: bool,
        bounds: Bounds,
        lanes: u64,
    ) -> Option<Recorder> {
        let (mut events, records) = SPARE.with(|s| s.pop()).unwrap_or_default();
        if events.capacity() == 0 {
            events.try_reserve(4096).ok()?;
        }
        let mut scopes = Vec::new();
        scopes.try_reserve(16).ok()?;
        scopes.push(Scope {
            parent: NONE,
            name: key,
            occurrence: 0,
            enter: 0,
            exit: LIVE,
        });
        let mut ordinals = Vec::new();
        ordinals.try_reserve(16).ok()?;
        ordinals.push(0);
        Some(Recorder {
            key,
            bounds,
            recorded: 0,
            events,
            time: 0,
            records,
            live: LiveTable::new()?,
            scopes,
            scope_index: FastMap::default(),
            occurrences: FastMap::default(),
            ordinals,
            uses: Vec::new(),
            frames: backtrace.then(Vec::new),
            lanes: LaneCount::new(lanes)?,
        })
    }

    /// Bytes of the recorder's own buffers.
    fn bytes(&self) -> u64 {
        let frames = self.frames.as_ref().map_or(0, |f| f.capacity() * 8);
        (self.events.capacity() * std::mem::size_of::<Event>()
            + self.records.capacity() * std::mem::size_of::<Record>()
            + self.live.bytes()
            + frames) as u64
    }

    /// Appends an event, within the bounds.
    #[inline]
    fn push_event(&mut self, e: Event) -> Result<(), Abandon> {
        self.recorded += 1;
        if self.recorded > self.bounds.events {
            return Err(AbandonReason::Bound);
        }
        if self.events.len() == self.events.capacity() {
            self.grow_events()?;
        }
        self.events.push(e);
        Ok(())
    }

    #[cold]
    fn grow_events(&mut self) -> Result<(), Abandon> {
        // Drain first: the buffer is reused, and the records it becomes are smaller.
        self.drain()?;
        if self.events.len() == self.events.capacity() {
            try_grow(&mut self.events).map_err(|_| AbandonReason::OutOfMemory)?;
        }
        if self.bytes() > self.bounds.bytes {
            return Err(AbandonReason::Bound);
        }
        Ok(())
    }

    fn tick(&mut self) -> u64 {
        let t = self.time;
        self.time += 1;
        t
    }

    /// Enters op `name` under scope `parent`; returns the scope node.
    pub(crate) fn enter_scope(&mut self, parent: u32, name: &'static str) -> Result<u32, Abandon> {
        let oom = |_| AbandonReason::OutOfMemory;
        self.occurrences.try_reserve(1).map_err(oom)?;
        self.scope_index.try_reserve(1).map_err(oom)?;
        try_grow(&mut self.scopes).map_err(|_| AbandonReason::OutOfMemory)?;
        try_grow(&mut self.ordinals).map_err(|_| AbandonReason::OutOfMemory)?;
        let occ = self.occurrences.entry((parent, name)).or_insert(0);
        let occurrence = *occ;
        *occ += 1;
        let next = self.scopes.len() as u32;
        let node = *self
            .scope_index
            .entry((parent, name, occurrence))
            .or_insert(next);
        if node == next {
            self.scopes.push(Scope {
                parent,
                name,
                occurrence,
                enter: LIVE,
                exit: LIVE,
            });
            self.ordinals.push(0);
            self.lanes.add_scope()?;
        }
        self.push_event(Event::Enter { node })?;
        Ok(node)
    }

    /// Exits scope `node` (`u32::MAX` or any unknown node: a scope past the stack depth,
    /// whose exit is only counted as an event).
    pub(crate) fn exit_scope(&mut self, node: u32) -> Result<(), Abandon> {
        self.push_event(Event::Exit { node })
    }

    /// Records an allocation of the pass.
    #[inline]
    pub(crate) fn on_alloc(
        &mut self,
        addr: *mut u8,
        size: u64,
        align: u64,
        zeroed: bool,
        scope: u32,
    ) -> Result<(), Abandon> {
        let site = self.capture_site()?;
        self.push_event(Event::Alloc {
            addr: addr as usize,
            size,
            scope,
            site,
            align: align as u32,
            zeroed,
        })
    }

    /// Records a free; frees of allocations made outside the pass are ignored.
    #[inline]
    pub(crate) fn on_dealloc(&mut self, addr: *mut u8) -> Result<(), Abandon> {
        self.push_event(Event::Free {
            addr: addr as usize,
        })
    }

    /// Records a realloc from `old` to `new`; reallocs of allocations made outside the
    /// pass are ignored (they are not planned).
    #[inline]
    pub(crate) fn on_realloc(
        &mut self,
        old: *mut u8,
        new: *mut u8,
        size: u64,
        align: u64,
    ) -> Result<(), Abandon> {
        let site = self.capture_site()?;
        self.push_event(Event::Realloc {
            old: old as usize,
            new: new as usize,
            size,
            site,
            align: align as u32,
        })
    }

    /// Resolves an interior pointer to the live allocation containing it and records the use.
    pub(crate) fn observe(&mut self, p: usize) -> Result<Option<u32>, Abandon> {
        self.drain()?;
        try_grow(&mut self.uses).map_err(|_| AbandonReason::OutOfMemory)?;
        let Some((id, start)) = self.live.iter().find_map(|(a, id)| {
            if id >= LANE_MARK {
                return None; // a lane request: not recorded
            }
            let size = self.records[id as usize].size as usize;
            (a <= p && p < a + size.max(1)).then_some((id, a))
        }) else {
            return Ok(None);
        };
        let time = self.tick();
        self.uses.push(TraceUse {
            time,
            allocation: id,
            offset: (p - start) as u64,
        });
        Ok(Some(id))
    }

    /// Processes the pending events in order: pairs frees and reallocs with their
    /// allocations, numbers ordinals and ticks the pass's clock.
    fn drain(&mut self) -> Result<(), Abandon> {
        let events = std::mem::take(&mut self.events);
        let result = self.process(&events);
        // Keep the buffer's capacity for the events still to come.
        self.events = events;
        self.events.clear();
        result
    }

    fn process(&mut self, events: &[Event]) -> Result<(), Abandon> {
        for e in events {
            match *e {
                Event::Alloc {
                    addr,
                    size,
                    scope,
                    site,
                    align,
                    zeroed,
                } => {
                    if let Some(k) = self.lanes.class_of(size, align as u64) {
                        self.count_lane(addr, scope, k)?;
                        continue;
                    }
                    let kind = if zeroed {
                        AllocKind::AllocZeroed
                    } else {
                        AllocKind::Alloc
                    };
                    self.push(addr, size, align as u64, kind, scope, NONE, site)?;
                }
                Event::Free { addr } => match self.live.remove(addr) {
                    Some(mark) if mark >= LANE_MARK => {
                        self.tick();
                        self.lanes.free(mark)?;
                    }
                    Some(id) => {
                        let t = self.tick();
                        self.records[id as usize].free = t;
                    }
                    None => {}
                },
                Event::Realloc {
                    old,
                    new,
                    size,
                    site,
                    align,
                } => {
                    let prev = self.live.remove(old);
                    if let Some(mark) = prev.filter(|&id| id >= LANE_MARK) {
                        // A lane request's chain: live in a cell until the chain ends.
                        let at = self.tick();
                        self.insert_live(new, mark, at)?;
                        self.lanes.realloc(mark, size, align as u64);
                    } else if let Some(prev) = prev {
                        let scope = self.records[prev as usize].scope;
                        let id = self.push(
                            new,
                            size,
                            align as u64,
                            AllocKind::Realloc,
                            scope,
                            prev,
                            site,
                        )?;
                        self.records[prev as usize].free = self.records[id as usize].alloc;
                    }
                }
                Event::Enter { node } => {
                    let t = self.tick();
                    if let Some(s) = self.scopes.get_mut(node as usize) {
                        if s.enter == LIVE {
                            s.enter = t;
                        }
                    }
                }
                Event::Exit { node } => {
                    let t = self.tick();
                    if let Some(s) = self.scopes.get_mut(node as usize) {
                        if node != 0 && s.exit == LIVE {
                            s.exit = t;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        addr: usize,
        size: u64,
        align: u64,
        kind: AllocKind,
        scope: u32,
        parent: u32,
        site: u32,
    ) -> Result<u32, Abandon> {
        try_grow(&mut self.records).map_err(|_| AbandonReason::OutOfMemory)?;
        let alloc = self.tick();
        let id = self.records.len() as u32;
        let ordinal = if kind == AllocKind::Realloc {
            NONE
        } else {
            match self.ordinals.get_mut(scope as usize) {
                Some(o) => {
                    let v = *o;
                    *o += 1;
                    v
                }
                None => NONE,
            }
        };
        if id >= LANE_MARK {
            return Err(AbandonReason::Bound);
        }
        self.insert_live(addr, id, alloc)?;
        self.records.push(Record {
            ptr: TaggedPtr::new(addr as *mut u8, id as u16),
            size,
            align_log2: align_log2(align),
            kind,
            alloc,
            free: LIVE,
            scope,
            ordinal,
            parent,
            lost: false,
            site,
        });
        Ok(id)
    }

    /// Maps live address `addr` to `id`. An address the backend handed out again before
    /// we saw its free was freed on another thread: its record is *lost* (its lifetime
    /// unknown, treated as escaping), and a lane request's cell stays counted live.
    /// `at`: the time of the allocation that took the address.
    fn insert_live(&mut self, addr: usize, id: u32, at: u64) -> Result<(), Abandon> {
        let replaced = self
            .live
            .insert(addr, id)
            .map_err(|_| AbandonReason::OutOfMemory)?;
        if let Some(old) = replaced.filter(|&old| old < LANE_MARK) {
            let r = &mut self.records[old as usize];
            r.free = at;
            r.lost = true;
        }
        Ok(())
    }

    /// Counts a lane request of class `k` at `addr`, in `scope` (see the module's
    /// documentation).
    fn count_lane(&mut self, addr: usize, scope: u32, k: usize) -> Result<(), Abandon> {
        let at = self.tick();
        let mark = self.lanes.alloc(scope, k)?;
        self.insert_live(addr, mark, at)
    }

    fn capture_site(&mut self) -> Result<u32, Abandon> {
        let Some(frames) = self.frames.as_mut() else {
            return Ok(NONE);
        };
        frames
            .try_reserve(FRAMES + 13)
            .map_err(|_| AbandonReason::OutOfMemory)?;
        let start = frames.len() as u32;
        let mut n = 0;
        // SAFETY: `trace_unsynchronized` requires that no other thread unwinds through
        // the unwinder's global state at the same time in a way that is not thread-safe;
        // on Linux the unwinder (libgcc's `_Unwind_Backtrace`) is thread-safe, which is
        // what backtrace's synchronized `trace` relies on too. We only read the IPs.
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                frames.push(frame.ip() as usize);
                n += 1;
                n < FRAMES + 12
            });
        }
        frames.push(0); // terminator
        Ok(start)
    }

    /// Ends the pass: its records become the profile (allocations still live are the
    /// escaping ones); the events buffer is kept spare for the next profile.
    pub(crate) fn finish(mut self) -> Result<Profile, Abandon> {
        self.drain()?;
        let oom = |_| AbandonReason::OutOfMemory;
        let end = self.time;
        let mut scopes = Vec::new();
        scopes.try_reserve_exact(self.scopes.len()).map_err(oom)?;
        scopes.extend(self.scopes.iter().enumerate().map(|(i, s)| TraceScope {
            id: i as u32,
            parent: (s.parent != NONE).then_some(s.parent),
            name: s.name.to_string(),
            occurrence: s.occurrence,
            enter: Some(s.enter),
            // A scope still open at the end of the pass (guard leaked or dropped out
            // of order) and the pass itself end with the pass.
            exit: Some(if s.exit == LIVE { end } else { s.exit }),
        }));
        keep_spare(std::mem::take(&mut self.events), Vec::new());
        Ok(Profile {
            key: self.key.to_string(),
            events: end,
            scopes,
            records: std::mem::take(&mut self.records),
            uses: std::mem::take(&mut self.uses),
            frames: self.frames.take().unwrap_or_default(),
            lanes: self.lanes.finish().map_err(oom)?,
        })
    }
}

/// Keeps a finished profile's buffers for the next profiles (the records once planning
/// has read them): emptied, and a record buffer only up to [`SPARE_RECORDS`] records.
pub(crate) fn keep_spare(mut events: Vec<Event>, mut records: Vec<Record>) {
    events.clear();
    records.clear();
    if records.capacity() > SPARE_RECORDS {
        records = Vec::new();
    }
    if events.capacity() == 0 && records.capacity() == 0 {
        return;
    }
    SPARE.with(|s| {
        // A pair missing what is given fills first.
        let half = s.iter().position(|(e, r)| {
            (events.capacity() == 0 || e.capacity() == 0)
                && (records.capacity() == 0 || r.capacity() == 0)
        });
        match half {
            Some(i) => {
                let (e, r) = &mut s[i];
                if events.capacity() > 0 {
                    *e = events;
                }
                if records.capacity() > 0 {
                    *r = records;
                }
            }
            None if s.len() < SPARES && try_grow(s).is_ok() => s.push((events, records)),
            None => {}
        }
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn p(a: usize) -> *mut u8 {
        a as *mut u8
    }

    const UNBOUNDED: Bounds = Bounds {
        events: u64::MAX,
        bytes: u64::MAX,
    };

    fn rec() -> Recorder {
        Recorder::new("k", false, UNBOUNDED, 0).unwrap()
    }

    #[test]
    fn recording_stops_at_its_bounds() {
        let mut r = Recorder::new(
            "k",
            false,
            Bounds {
                events: 1000,
                bytes: u64::MAX,
            },
            0,
        )
        .unwrap();
        let mut n = 0;
        let err = loop {
            match r.on_alloc(p(0x1000 + 16 * n), 8, 8, false, 0) {
                Ok(()) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!((err, n), (AbandonReason::Bound, 1000));
        let mut r = Recorder::new(
            "k",
            false,
            Bounds {
                events: u64::MAX,
                bytes: 1 << 20,
            },
            0,
        )
        .unwrap();
        let mut n = 0usize;
        let err = loop {
            match r.on_alloc(p(0x1000 + 16 * n), 8, 8, false, 0) {
                Ok(()) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(err, AbandonReason::Bound);
        assert!(
            r.bytes() <= 2 << 20,
            "stopped near the byte bound: {}",
            r.bytes()
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "65,537 records: tens of minutes under Miri")]
    fn large_record_buffers_are_not_kept_spare() {
        let _ = SPARE.with(std::mem::take);
        let mut r = rec();
        for i in 0..SPARE_RECORDS + 1 {
            r.on_alloc(p(0x1000 + 16 * i), 8, 8, false, 0).unwrap();
        }
        // Planning gives the records back once it has read them.
        keep_spare(Vec::new(), r.finish().unwrap().records);
        let kept = SPARE.with(|s| s.iter().map(|(_, r)| r.capacity()).max());
        assert!(kept.unwrap_or(0) <= SPARE_RECORDS, "{kept:?}");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "70,000 records to wrap the tag: tens of minutes under Miri"
    )]
    fn pairs_frees_exactly_under_address_reuse_and_tag_wrap() {
        let mut r = rec();
        // 70,000 allocations all at the same address: each freed before the next.
        for _ in 0..70_000 {
            r.on_alloc(p(0x1000), 8, 8, false, 0).unwrap();
            r.on_dealloc(p(0x1000)).unwrap();
        }
        let t = r.finish().unwrap().to_trace();
        assert_eq!(t.allocations.len(), 70_000);
        for (i, a) in t.allocations.iter().enumerate() {
            assert_eq!(a.alloc, 2 * i as u64);
            assert_eq!(a.free, Some(2 * i as u64 + 1));
            assert_eq!(a.tag, i as u16);
            assert_eq!(a.ordinal, Some(i as u32));
            assert!(!a.escaping);
        }
        // Tags wrap, ids don't.
        assert_eq!(t.allocations[65_536].tag, 0);
    }

    #[test]
    fn reallocs_continue_the_chain_and_escapes_are_marked() {
        let mut r = rec();
        r.on_alloc(p(0x100), 8, 8, false, 0).unwrap();
        r.on_realloc(p(0x100), p(0x200), 64, 8).unwrap();
        r.on_realloc(p(0x200), p(0x200), 128, 8).unwrap();
        r.on_alloc(p(0x300), 8, 8, true, 0).unwrap();
        r.on_dealloc(p(0x200)).unwrap();
        let t = r.finish().unwrap().to_trace();
        assert_eq!(t.allocations[1].realloc_parent, Some(0));
        assert_eq!(t.allocations[2].realloc_parent, Some(1));
        assert_eq!(t.allocations[1].ordinal, None);
        assert_eq!(t.allocations[3].ordinal, Some(1));
        assert!(t.allocations[3].escaping);
        let chains = t.chains();
        assert_eq!(chains.len(), 2);
        assert_eq!(
            (chains[0].lower, chains[0].upper, chains[0].size),
            (0, Some(4), 128)
        );
        assert!(chains[1].escaping);
        let (problem, _) = t.to_problem();
        assert_eq!(problem.len(), 1);
    }

    #[test]
    fn unseen_frees_make_allocations_escape() {
        let mut r = rec();
        r.on_alloc(p(0x100), 8, 8, false, 0).unwrap();
        // Freed on another thread, then handed out again here.
        r.on_alloc(p(0x100), 8, 8, false, 0).unwrap();
        r.on_dealloc(p(0x100)).unwrap();
        let t = r.finish().unwrap().to_trace();
        assert!(t.allocations[0].escaping);
        assert!(!t.allocations[1].escaping);
    }

    #[test]
    fn scopes_are_keyed_by_parent_name_and_occurrence() {
        let mut r = rec();
        let a = r.enter_scope(0, "conv").unwrap();
        r.on_alloc(p(0x10), 4, 4, false, a).unwrap();
        r.exit_scope(a).unwrap();
        let b = r.enter_scope(0, "conv").unwrap();
        r.on_alloc(p(0x20), 4, 4, false, b).unwrap();
        let c = r.enter_scope(b, "im2col").unwrap();
        r.exit_scope(c).unwrap();
        r.exit_scope(b).unwrap();
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert_eq!(r.observe(0x22), Ok(Some(1)));
        assert_eq!(r.observe(0x99), Ok(None));
        let t = r.finish().unwrap().to_trace();
        assert_eq!(t.scopes[b as usize].occurrence, 1);
        assert_eq!(t.scopes[c as usize].parent, Some(b));
        assert_eq!(t.allocations[1].ordinal, Some(0));
        assert_eq!(t.uses.len(), 1);
        assert_eq!(t.uses[0].offset, 2);
        // enter a, alloc, exit a, enter b, alloc, enter c, exit c, exit b, observe.
        let times: Vec<_> = t.scopes.iter().map(|s| (s.enter, s.exit)).collect();
        assert_eq!(
            times,
            [
                (Some(0), Some(9)),
                (Some(0), Some(2)),
                (Some(3), Some(7)),
                (Some(5), Some(6))
            ]
        );
    }
}
