//! A workload read from a trace recorded by memo-alloc (`MEMO_TRACE_DIR`): the recorded
//! allocations, frees and reallocs replayed in event order with their sizes, alignments
//! and op scopes, each buffer written (one byte per 64) when allocated and read when freed.

use std::alloc::{alloc, dealloc, realloc, Layout};

use memo_alloc::trace::{AllocKind, Trace};

/// One step of a recorded pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Allocate buffer `id` in op-scope `scope`.
    Alloc {
        /// Allocation index in the trace.
        id: u32,
        /// Size in bytes.
        size: usize,
        /// Alignment.
        align: usize,
        /// Scope id in the trace.
        scope: u32,
    },
    /// Reallocate buffer `from` into buffer `id`.
    Realloc {
        /// Allocation continued.
        from: u32,
        /// The new allocation.
        id: u32,
        /// New size.
        size: usize,
    },
    /// Free buffer `id`.
    Free {
        /// Allocation freed.
        id: u32,
    },
}

/// A trace turned into a program.
#[derive(Clone, Debug)]
pub struct TraceProgram {
    /// Scope path names from the root's child down, per scope id.
    pub paths: Vec<Vec<&'static str>>,
    /// Events in time order.
    pub events: Vec<Event>,
    /// Number of allocations (buffer slots).
    pub buffers: usize,
    /// Bytes allocated by one pass.
    pub bytes: u64,
}

impl TraceProgram {
    /// Builds the program of `trace`.
    pub fn new(trace: &Trace) -> Result<TraceProgram, String> {
        let mut paths: Vec<Vec<&'static str>> = Vec::with_capacity(trace.scopes.len());
        for s in &trace.scopes {
            let path = match s.parent {
                None => Vec::new(),
                Some(p) => {
                    let mut v = paths
                        .get(p as usize)
                        .cloned()
                        .ok_or_else(|| format!("scope {} has a later parent {p}", s.id))?;
                    v.push(&*Box::leak(s.name.clone().into_boxed_str()));
                    v
                }
            };
            paths.push(path);
        }
        let mut timed: Vec<(u64, u8, Event)> = Vec::new();
        let mut bytes = 0;
        let mut moved = vec![false; trace.allocations.len()];
        for a in &trace.allocations {
            if let Some(p) = a.realloc_parent {
                if let Some(m) = moved.get_mut(p as usize) {
                    *m = true;
                }
            }
        }
        for a in &trace.allocations {
            let ev = match (a.kind, a.realloc_parent) {
                (AllocKind::Realloc, Some(from)) => Event::Realloc {
                    from,
                    id: a.id,
                    size: a.size.max(1) as usize,
                },
                _ => Event::Alloc {
                    id: a.id,
                    size: a.size.max(1) as usize,
                    align: a.align.max(1) as usize,
                    scope: a.scope.min(trace.scopes.len().saturating_sub(1) as u32),
                },
            };
            bytes += a.size;
            timed.push((a.alloc, 1, ev));
            // A realloc's parent is freed by the realloc itself.
            if let (Some(f), false) = (a.free, moved[a.id as usize]) {
                timed.push((f, 0, Event::Free { id: a.id }));
            }
        }
        timed.sort_by_key(|(t, k, _)| (*t, *k));
        Ok(TraceProgram {
            paths,
            events: timed.into_iter().map(|(_, _, e)| e).collect(),
            buffers: trace.allocations.len(),
            bytes,
        })
    }

    /// Runs one pass; returns the buffers still live at its end (they escape) and a
    /// checksum of what was read.
    pub fn run(&self, scopes: bool) -> (Vec<Block>, u64) {
        let mut live: Vec<Option<Block>> = (0..self.buffers).map(|_| None).collect();
        let mut guards: Vec<(&'static str, memo_alloc::OpGuard)> = Vec::new();
        let mut sum = 0u64;
        for ev in &self.events {
            match *ev {
                Event::Alloc {
                    id,
                    size,
                    align,
                    scope,
                } => {
                    if scopes {
                        let path = &self.paths[scope as usize];
                        let common = guards
                            .iter()
                            .zip(path)
                            .take_while(|((g, _), p)| g == *p)
                            .count();
                        while guards.len() > common {
                            drop(guards.pop());
                        }
                        for &name in &path[common..] {
                            guards.push((name, memo_alloc::op(name)));
                        }
                    }
                    live[id as usize] = Block::new(size, align, id);
                }
                Event::Realloc { from, id, size } => {
                    if let Some(b) = live[from as usize].take() {
                        live[id as usize] = b.grow(size);
                    }
                }
                Event::Free { id } => {
                    if let Some(b) = live[id as usize].take() {
                        sum = sum.wrapping_add(b.read());
                    }
                }
            }
        }
        while guards.pop().is_some() {}
        (live.into_iter().flatten().collect(), sum)
    }
}

/// A raw buffer of a trace program.
pub struct Block {
    ptr: *mut u8,
    layout: Layout,
}

impl Block {
    fn new(size: usize, align: usize, id: u32) -> Option<Block> {
        let layout = Layout::from_size_align(size, align.next_power_of_two()).ok()?;
        // SAFETY: non-zero size (at least 1).
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            return None;
        }
        let b = Block { ptr, layout };
        b.touch(0, id as u8);
        Some(b)
    }

    fn touch(&self, from: usize, v: u8) {
        let mut i = from;
        while i < self.layout.size() {
            // SAFETY: `i` is inside the allocation.
            unsafe { self.ptr.add(i).write(v.wrapping_add((i >> 6) as u8)) };
            i += 64;
        }
    }

    fn grow(self, size: usize) -> Option<Block> {
        let old = self.layout.size();
        // SAFETY: `ptr` was allocated with `layout`; `size` is non-zero.
        let ptr = unsafe { realloc(self.ptr, self.layout, size) };
        let layout = Layout::from_size_align(size, self.layout.align()).ok()?;
        std::mem::forget(self);
        if ptr.is_null() {
            return None;
        }
        let b = Block { ptr, layout };
        b.touch(old.div_ceil(64) * 64, 7);
        Some(b)
    }

    /// Sums the touched bytes.
    pub fn read(&self) -> u64 {
        let mut s = 0u64;
        let mut i = 0;
        while i < self.layout.size() {
            // SAFETY: `i` is inside the allocation and was written.
            s += unsafe { self.ptr.add(i).read() } as u64;
            i += 64;
        }
        s
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
