//! Settings: `MEMO_MODE`, `MEMO_STRATEGY`, `MEMO_TRACE_DIR`, `MEMO_PLAN_DIR`,
//! `MEMO_BACKTRACE`, `MEMO_MAX_PLANS`, read once at the first pass, or set in code first.

use std::path::PathBuf;
use std::sync::OnceLock;

use memo_planner::OffsetStrategy;

/// What passes do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Profile the first pass of each key, replay later ones from slabs (the default).
    Replay,
    /// Profile every pass (and write traces when a trace directory is set); never replay.
    Profile,
    /// Passes do nothing: every allocation goes to the backend.
    Off,
}

impl Mode {
    /// Parses `replay`, `profile` or `off`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "replay" | "" => Some(Mode::Replay),
            "profile" => Some(Mode::Profile),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }
}

/// The allocator's settings.
///
/// ```
/// use memo_alloc::{Config, Mode};
/// let c = Config { mode: Mode::Profile, ..Config::default() };
/// assert_eq!(c.strategy.name(), "best");
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// What passes do (`MEMO_MODE`).
    pub mode: Mode,
    /// Offset strategy for new plans (`MEMO_STRATEGY`, default `best`).
    pub strategy: OffsetStrategy,
    /// Where each profiled pass writes its trace and plan as JSON (`MEMO_TRACE_DIR`).
    pub trace_dir: Option<PathBuf>,
    /// Where plans saved earlier are loaded from at the first pass (`MEMO_PLAN_DIR`).
    pub plan_dir: Option<PathBuf>,
    /// Capture call sites during profiling (`MEMO_BACKTRACE=1`).
    pub backtrace: bool,
    /// Most plans kept; the least recently used is dropped with its slabs (`MEMO_MAX_PLANS`).
    pub max_plans: usize,
    /// A replayed key whose passes miss more than this share of allocations over
    /// [`Config::miss_window`] passes is profiled again.
    pub replan_miss_ratio: f64,
    /// Number of replayed passes over which misses are counted.
    pub miss_window: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Replay,
            strategy: OffsetStrategy::Best,
            trace_dir: None,
            plan_dir: None,
            backtrace: false,
            max_plans: 64,
            replan_miss_ratio: 0.05,
            miss_window: 3,
        }
    }
}

impl Config {
    /// The defaults overridden by the `MEMO_*` environment variables. Unknown values are
    /// reported on stderr and ignored.
    pub fn from_env() -> Config {
        let mut c = Config::default();
        if let Ok(v) = std::env::var("MEMO_MODE") {
            match Mode::parse(&v) {
                Some(m) => c.mode = m,
                None => eprintln!(
                    "memomalloc: MEMO_MODE={v:?} is not replay, profile or off; using replay"
                ),
            }
        }
        if let Ok(v) = std::env::var("MEMO_STRATEGY") {
            match v.trim().parse::<OffsetStrategy>() {
                Ok(s) => c.strategy = s,
                Err(e) => eprintln!("memomalloc: MEMO_STRATEGY: {e}; using best"),
            }
        }
        c.trace_dir = std::env::var_os("MEMO_TRACE_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        c.plan_dir = std::env::var_os("MEMO_PLAN_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        c.backtrace = matches!(
            std::env::var("MEMO_BACKTRACE").as_deref(),
            Ok("1") | Ok("true")
        );
        if let Ok(v) = std::env::var("MEMO_MAX_PLANS") {
            match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => c.max_plans = n,
                _ => eprintln!("memomalloc: MEMO_MAX_PLANS={v:?} is not a positive number"),
            }
        }
        c
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets the configuration before the first pass. Returns `false` (and changes nothing) if
/// the configuration was already fixed, by an earlier call or by the first pass.
pub fn configure(config: Config) -> bool {
    crate::tls::with_bookkeeping(|| CONFIG.set(config).is_ok())
}

/// The configuration in force (read from the environment on first use).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}
