//! The trace of a whole-program recording, built from every thread's log.
//!
//! The logs are merged by sequence number (one order of every thread's events that agrees
//! with what happened before what), then replayed: a free ends the live block at its
//! address (frees of blocks never seen allocated are counted and left out), a realloc ends
//! its old block and starts a new one continuing it, an address handed out again while its
//! block looked live means that block was freed unseen (it is marked escaping, as a pass
//! trace marks it). Time is dense: every kept allocation, free, realloc, scope enter and
//! exit is one tick. Scope 0 is the program; each pass and op instance is a scope under
//! the scope its thread was in (a helper context's under the scope that carried the pass).
//! Blocks live at the end are escaping: the leaks of the program (or, in a truncated
//! recording, what was live when it stopped).

use std::collections::HashMap;

use crate::format::trace::{
    AllocKind, AllocWhen, Recording, ScopeKind, ScopeWhen, Trace, TraceAlloc, TraceScope,
    TraceThread, WholeProgram, TRACE_FORMAT, TRACE_VERSION,
};
use crate::observe::log::{Ev, EvKind, ThreadObs, NO_SITE};
use crate::observe::FAILED;
use crate::profiling::profile::{keep_frames, resolve_ip};
use crate::profiling::tag::TaggedPtr;

/// What the trace records of its program.
pub(crate) struct Program {
    pub(crate) key: String,
    pub(crate) pid: u64,
    pub(crate) command: String,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) site_sample: u64,
    pub(crate) truncated: bool,
    pub(crate) dropped: u64,
}

/// The trace of the logs of `threads` (none of them appending).
pub(crate) fn build(threads: &[&ThreadObs], program: Program) -> Trace {
    let logging: Vec<&ThreadObs> = threads
        .iter()
        .copied()
        .filter(|t| t.events().next().is_some())
        .collect();
    let mut merged: Vec<(u64, u32, &Ev)> = Vec::new();
    for (i, t) in logging.iter().enumerate() {
        merged.extend(t.events().map(|e| (e.seq, i as u32, e)));
    }
    merged.sort_unstable_by_key(|m| m.0);
    let mut b = Builder::new(&logging, program.start_ns);
    for (_, thread, ev) in merged {
        b.event(thread, ev);
    }
    b.finish(&logging, program)
}

/// The trace being built (see the module documentation).
struct Builder<'a> {
    threads: &'a [&'a ThreadObs],
    start_ns: u64,
    time: u64,
    allocations: Vec<TraceAlloc>,
    scopes: Vec<TraceScope>,
    scope_when: Vec<ScopeWhen>,
    exited: Vec<bool>,
    /// Recorded scope id to trace scope.
    scope_of: HashMap<u32, u32>,
    occurrences: HashMap<(u32, String), u32>,
    ordinals: Vec<u32>,
    /// Live blocks by address: their allocation ids.
    live: HashMap<usize, u32>,
    /// Per thread, the old block of its realloc in progress.
    moving: Vec<Option<u32>>,
    /// Symbol names by instruction pointer.
    names: HashMap<usize, Vec<String>>,
    unknown_frees: u64,
}

impl<'a> Builder<'a> {
    fn new(threads: &'a [&'a ThreadObs], start_ns: u64) -> Builder<'a> {
        Builder {
            threads,
            start_ns,
            time: 0,
            allocations: Vec::new(),
            scopes: Vec::new(),
            scope_when: Vec::new(),
            exited: Vec::new(),
            scope_of: HashMap::new(),
            occurrences: HashMap::new(),
            ordinals: vec![0],
            live: HashMap::new(),
            moving: vec![None; threads.len()],
            names: HashMap::new(),
            unknown_frees: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.time += 1;
        self.time - 1
    }

    fn ns(&self, ev: &Ev) -> u64 {
        ev.ns.saturating_sub(self.start_ns)
    }

    fn event(&mut self, thread: u32, ev: &Ev) {
        match ev.kind {
            EvKind::Alloc | EvKind::AllocZeroed => {
                let kind = if ev.kind == EvKind::Alloc {
                    AllocKind::Alloc
                } else {
                    AllocKind::AllocZeroed
                };
                let scope = self.scope(ev.scope);
                self.push(thread, ev, kind, scope, None);
            }
            EvKind::Free => match self.live.remove(&ev.addr) {
                Some(id) => {
                    let t = self.tick();
                    self.end(id, t, thread, ev);
                }
                None => self.unknown_frees += 1,
            },
            EvKind::ReallocFree => {
                let old = self.live.remove(&ev.addr);
                if let Some(slot) = self.moving.get_mut(thread as usize) {
                    *slot = old;
                }
            }
            EvKind::Realloc => self.realloc(thread, ev),
            EvKind::Enter => self.enter(thread, ev),
            EvKind::Exit => {
                let t = self.tick();
                if let Some(&s) = self.scope_of.get(&ev.scope) {
                    let ns = self.ns(ev);
                    self.scopes[s as usize - 1].exit = Some(t);
                    self.scope_when[s as usize - 1].exit_ns = ns;
                    self.exited[s as usize - 1] = true;
                }
            }
        }
    }

    /// The new block of a realloc: it continues the old block the thread's `ReallocFree`
    /// took off the live blocks (a failed realloc puts it back).
    fn realloc(&mut self, thread: u32, ev: &Ev) {
        let old = self.moving.get_mut(thread as usize).and_then(Option::take);
        if ev.size == FAILED {
            if let Some(old) = old {
                self.live.insert(ev.addr, old);
            }
            return;
        }
        let scope = match old {
            Some(p) => self.allocations[p as usize].scope,
            None => self.scope(ev.scope),
        };
        let t = self.push(thread, ev, AllocKind::Realloc, scope, old);
        if let Some(p) = old {
            self.end(p, t, thread, ev);
        }
    }

    /// Ends block `id` at tick `t` by `ev` of `thread`.
    fn end(&mut self, id: u32, t: u64, thread: u32, ev: &Ev) {
        let ns = self.ns(ev);
        let a = &mut self.allocations[id as usize];
        a.free = Some(t);
        if let Some(w) = a.when.as_mut() {
            w.free_thread = Some(thread);
            w.free_ns = Some(ns.max(w.ns));
        }
    }

    /// The trace scope of recorded scope `id` (0: the program, or a scope entered before
    /// the recording began).
    fn scope(&self, id: u32) -> u32 {
        self.scope_of.get(&id).copied().unwrap_or(0)
    }

    /// Adds the allocation `ev` of `thread` in `scope`, continuing `parent`; returns its
    /// tick.
    fn push(
        &mut self,
        thread: u32,
        ev: &Ev,
        kind: AllocKind,
        scope: u32,
        parent: Option<u32>,
    ) -> u64 {
        let t = self.tick();
        let id = self.allocations.len() as u32;
        if let Some(old) = self.live.insert(ev.addr, id) {
            // Freed unseen (on a thread not observed then): its end is unknown.
            let a = &mut self.allocations[old as usize];
            a.free = Some(t);
            a.escaping = true;
        }
        let ordinal = (kind != AllocKind::Realloc).then(|| {
            let o = &mut self.ordinals[scope as usize];
            *o += 1;
            *o - 1
        });
        let call_site = self.call_site(thread, ev.site);
        let ns = self.ns(ev);
        self.allocations.push(TraceAlloc {
            id,
            tag: id as u16,
            ptr: TaggedPtr::new(ev.addr as *mut u8, id as u16).raw(),
            size: ev.size,
            align: 1u64 << ev.extra.min(63),
            kind,
            alloc: t,
            free: None,
            scope,
            ordinal,
            realloc_parent: parent,
            escaping: false,
            call_site,
            when: Some(AllocWhen {
                thread,
                ns,
                free_thread: None,
                free_ns: None,
            }),
        });
        t
    }

    /// The resolved frames of call site `site` of `thread`'s frames.
    fn call_site(&mut self, thread: u32, site: u32) -> Option<Vec<String>> {
        if site == NO_SITE {
            return None;
        }
        let frames = &self.threads.get(thread as usize)?.frames;
        let ips: Vec<usize> = frames
            .get(site as usize..)?
            .iter()
            .take_while(|&&ip| ip != 0)
            .copied()
            .collect();
        let names = &mut self.names;
        let resolved: Vec<Vec<String>> = ips
            .iter()
            .map(|&ip| names.entry(ip).or_insert_with(|| resolve_ip(ip)).clone())
            .collect();
        Some(keep_frames(resolved))
    }

    /// A scope entered: under the scope its thread was in, named by the event.
    fn enter(&mut self, thread: u32, ev: &Ev) {
        if self.scope_of.contains_key(&ev.scope) {
            return;
        }
        let t = self.tick();
        let kind = scope_kind(ev.extra);
        let name = if kind == ScopeKind::Helper {
            format!("@{}", ev.size)
        } else {
            // SAFETY: an `Enter` event's address and size are those of a `&'static str`
            // (an op name, or a pass key interned for the life of the process).
            let bytes =
                unsafe { std::slice::from_raw_parts(ev.addr as *const u8, ev.size as usize) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        let parent = self.scope(ev.site);
        let occ = self.occurrences.entry((parent, name.clone())).or_insert(0);
        let occurrence = *occ;
        *occ += 1;
        let id = self.scopes.len() as u32 + 1;
        self.scope_of.insert(ev.scope, id);
        self.scopes.push(TraceScope {
            id,
            parent: Some(parent),
            name,
            occurrence,
            enter: Some(t),
            exit: Some(t),
        });
        let ns = self.ns(ev);
        self.scope_when.push(ScopeWhen {
            kind,
            thread,
            enter_ns: ns,
            exit_ns: ns,
        });
        self.exited.push(false);
        self.ordinals.push(0);
    }

    /// The trace: the program's scope first, scopes never left end with it, blocks live
    /// at the end escape.
    fn finish(mut self, threads: &[&ThreadObs], p: Program) -> Trace {
        let events = self.time.max(1);
        let duration_ns = p.end_ns.saturating_sub(p.start_ns);
        let mut scopes = Vec::with_capacity(self.scopes.len() + 1);
        scopes.push(TraceScope {
            id: 0,
            parent: None,
            name: p.key.clone(),
            occurrence: 0,
            enter: Some(0),
            exit: Some(events),
        });
        let mut when = Vec::with_capacity(self.scopes.len() + 1);
        when.push(ScopeWhen {
            kind: ScopeKind::Program,
            thread: 0,
            enter_ns: 0,
            exit_ns: duration_ns,
        });
        for ((mut s, mut w), exited) in self
            .scopes
            .into_iter()
            .zip(self.scope_when)
            .zip(self.exited)
        {
            if !exited {
                s.exit = Some(events);
                w.exit_ns = duration_ns;
            }
            scopes.push(s);
            when.push(w);
        }
        for &id in self.live.values() {
            self.allocations[id as usize].escaping = true;
        }
        Trace {
            format: TRACE_FORMAT.to_string(),
            version: TRACE_VERSION,
            key: p.key,
            events,
            scopes,
            allocations: self.allocations,
            uses: Vec::new(),
            recording: Some(Recording {
                start_ns: p.start_ns,
                duration_ns,
                threads: trace_threads(threads),
                scopes: when,
                program: Some(WholeProgram {
                    pid: p.pid,
                    command: p.command,
                    site_sample_bytes: p.site_sample,
                    truncated: p.truncated,
                    dropped_events: p.dropped,
                    unknown_frees: self.unknown_frees,
                }),
            }),
        }
    }
}

fn scope_kind(extra: u8) -> ScopeKind {
    match extra {
        0 => ScopeKind::Program,
        1 => ScopeKind::Pass,
        3 => ScopeKind::Helper,
        _ => ScopeKind::Op,
    }
}

fn trace_threads(threads: &[&ThreadObs]) -> Vec<TraceThread> {
    (0u32..)
        .zip(threads)
        .map(|(id, t)| TraceThread {
            id,
            tid: t.tid,
            name: t.name(),
        })
        .collect()
}
