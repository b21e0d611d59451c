//! A tensor buffer written and read with a stride, so the work per byte can go below one
//! element per element (down to one element per 64-byte cache line).

/// Elements written per chunk by [`Buf::dense`].
pub const CHUNK: usize = 1024;

/// `f32` storage of `len` elements of which every `step`-th is initialised.
///
/// Allocated with `Vec::with_capacity` (one allocation of exactly `4 * len` bytes, like an
/// engine's uninitialised tensor); only the elements at multiples of `step` are written
/// and read.
pub struct Buf {
    data: Vec<f32>,
    len: usize,
    step: usize,
}

impl Buf {
    /// A buffer of `len` elements whose element `i` (for `i % step == 0`) is `f(i)`.
    pub fn from_fn(len: usize, step: usize, mut f: impl FnMut(usize) -> f32) -> Buf {
        let step = step.max(1);
        let mut data = Vec::with_capacity(len);
        let spare = data.spare_capacity_mut();
        let mut i = 0;
        while i < len {
            spare[i].write(f(i));
            i += step;
        }
        Buf { data, len, step }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A fully initialised buffer (step 1) of `len` elements, written chunk by chunk:
    /// `fill(start, chunk)` writes elements `start..start + chunk.len()`.
    pub fn dense(len: usize, mut fill: impl FnMut(usize, &mut [f32])) -> Buf {
        let mut data: Vec<f32> = Vec::with_capacity(len);
        let mut chunk = [0.0f32; CHUNK];
        let mut start = 0;
        while start < len {
            let n = CHUNK.min(len - start);
            fill(start, &mut chunk[..n]);
            data.extend_from_slice(&chunk[..n]);
            start += n;
        }
        Buf { data, len, step: 1 }
    }

    /// The elements, when the buffer is dense (step 1).
    pub fn as_dense(&self) -> Option<&[f32]> {
        (self.step == 1).then_some(&self.data[..])
    }

    /// Elements between initialised elements.
    pub fn step(&self) -> usize {
        self.step
    }

    /// The element at `i`, which must be a multiple of the step below `len` (checked).
    #[inline]
    pub fn at(&self, i: usize) -> f32 {
        assert!(i < self.len && (self.step == 1 || i % self.step == 0));
        // SAFETY: `i` is a multiple of `step` below `len` <= capacity: written in
        // `from_fn`, and the allocation holds `capacity` elements.
        unsafe { self.data.as_ptr().add(i).read() }
    }

    /// Sum of the initialised elements (reads the whole buffer at its step).
    pub fn sum(&self) -> f32 {
        if let Some(d) = self.as_dense() {
            let mut acc = [0.0f32; 8];
            let chunks = d.chunks_exact(8);
            let rest: f32 = chunks.remainder().iter().sum();
            for c in chunks {
                for k in 0..8 {
                    acc[k] += c[k];
                }
            }
            return acc.iter().sum::<f32>() + rest;
        }
        let mut s = 0.0f32;
        let mut i = 0;
        while i < self.len {
            s += self.at(i);
            i += self.step;
        }
        s
    }

    /// A hash of the initialised elements' bits.
    pub fn hash_into(&self, h: &mut u64) {
        let mut i = 0;
        while i < self.len {
            *h = (*h ^ self.at(i).to_bits() as u64).wrapping_mul(0x100_0000_01b3);
            i += self.step;
        }
    }
}
