//! Blocks handed between threads: a thread swaps a block of its pass into a random slot
//! and frees (after checking) the block it takes out, made by whichever thread put it.

use std::sync::Mutex;

use super::block::Block;

/// Slots of blocks in transit.
const SLOTS: usize = 64;

static SLOTS_: [Mutex<Option<Block>>; SLOTS] = [const { Mutex::new(None) }; SLOTS];

/// Puts `block` into slot `slot % SLOTS`; returns the block that was there.
pub fn swap(slot: u64, block: Block) -> Option<Block> {
    let mut s = SLOTS_[slot as usize % SLOTS]
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    s.replace(block)
}

/// Frees every block in transit.
pub fn drain() {
    for s in &SLOTS_ {
        drop(s.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}
