//! Heap maps: a plan drawn as SVG (time across, address up, one rectangle per buffer).
