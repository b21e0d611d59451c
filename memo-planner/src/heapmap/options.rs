//! What a heap map draws and how: [`HeapmapOptions`] and [`Coloring`].

/// How buffers are coloured when no groups are given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coloring {
    /// By size on a log scale, at most eight classes (legend: size ranges).
    #[default]
    SizeClass,
    /// By a hash of the id (no legend).
    IdHash,
}

/// What to draw and how; see the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapmapOptions {
    /// The title at the top (escaped; may be empty).
    pub title: String,
    /// Width of the picture in pixels (clamped to 240..=8192).
    pub width: u32,
    /// Height of the picture in pixels (clamped to 160..=8192).
    pub height: u32,
    /// One group label per buffer, in the problem's order: colours buffers by group, with
    /// a legend. Overrides [`HeapmapOptions::coloring`].
    pub groups: Option<Vec<String>>,
    /// The colouring when `groups` is `None`.
    pub coloring: Coloring,
    /// The lower bound to mark; `None` computes [`crate::offsets_lower_bound`] (`O(n log n)`).
    pub lower_bound: Option<u64>,
    /// Draw only the time window `[start, end)`; `None` for the automatic range.
    pub time_range: Option<(u64, u64)>,
    /// With no `time_range`, stop the time axis before a long stretch at the end where only
    /// a few long-lived buffers are alive (see the [module documentation](self)).
    pub trim_long_lived: bool,
    /// Tooltips only when at most this many buffers are drawn.
    pub max_tooltips: usize,
    /// Above this many drawn buffers, merge sub-pixel ones (and then the smallest on
    /// screen) into a coverage raster.
    pub max_rects: usize,
}

impl Default for HeapmapOptions {
    fn default() -> HeapmapOptions {
        HeapmapOptions {
            title: "Heap map".to_string(),
            width: 1200,
            height: 720,
            groups: None,
            coloring: Coloring::SizeClass,
            lower_bound: None,
            time_range: None,
            trim_long_lived: true,
            max_tooltips: 5000,
            max_rects: 20_000,
        }
    }
}
