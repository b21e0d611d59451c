//! Settings: `MEMO_MODE`, `MEMO_STRATEGY`, `MEMO_PLANNER`, `MEMO_TRACE_DIR`, `MEMO_PLAN_DIR`,
//! `MEMO_BACKTRACE`, `MEMO_MAX_PLANS`, `MEMO_MAX_PROFILE_EVENTS`, `MEMO_MAX_PROFILE_BYTES`,
//! `MEMO_LANES`, read once at the first pass, or set in code first.

use std::path::PathBuf;
use std::sync::OnceLock;

use memo_planner::OffsetStrategy;
use serde::{Deserialize, Serialize};

/// What passes do. It serialises as its name (`replay`, `profile`, `off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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

/// Where profiles are planned. It serialises as its name (`background`, `inline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Planner {
    /// On the allocator's planner thread: a profiled pass returns without waiting
    /// (the default; see `wait_for_plans`).
    Background,
    /// On the thread that ends the profiled pass, before its guard's drop returns
    /// (deterministic: the next pass of the key replays).
    Inline,
}

impl Planner {
    /// Parses `background` or `inline`.
    pub fn parse(s: &str) -> Option<Planner> {
        match s.trim().to_ascii_lowercase().as_str() {
            "background" | "" => Some(Planner::Background),
            "inline" => Some(Planner::Inline),
            _ => None,
        }
    }
}

/// The allocator's settings: the defaults, the environment's ([`Config::from_env`]), set
/// field by field or with the `with_*` methods. It serialises with serde (the strategy by
/// its name; a document may leave out any field, which keeps its default).
///
/// ```
/// use memo_alloc::{Config, Mode};
/// let c = Config::default().with_mode(Mode::Profile).with_lanes(0);
/// assert_eq!((c.mode, c.lanes, c.strategy.name()), (Mode::Profile, 0, "best"));
/// let json = serde_json::to_string(&c).unwrap();
/// assert!(json.contains(r#""mode":"profile""#) && json.contains(r#""strategy":"best""#));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Config {
    /// What passes do (`MEMO_MODE`).
    pub mode: Mode,
    /// Offset strategy for new plans (`MEMO_STRATEGY`, default `best`).
    #[serde(with = "strategy_name")]
    pub strategy: OffsetStrategy,
    /// Where profiles are planned (`MEMO_PLANNER=background|inline`).
    pub planner: Planner,
    /// Where each profiled pass writes its trace and plan as JSON (`MEMO_TRACE_DIR`).
    pub trace_dir: Option<PathBuf>,
    /// Where plans saved earlier are loaded from at the first pass (`MEMO_PLAN_DIR`).
    pub plan_dir: Option<PathBuf>,
    /// Capture call sites during profiling (`MEMO_BACKTRACE=1`).
    pub backtrace: bool,
    /// Most plans kept (`MEMO_MAX_PLANS`). Beyond it, the least used plan is dropped with
    /// its slabs, and a key with no plan is profiled only if it is used more than that plan.
    pub max_plans: usize,
    /// Most events (allocations, frees, reallocs, op enters and exits) one profile records
    /// (`MEMO_MAX_PROFILE_EVENTS`); past it the profile is abandoned and the pass goes on
    /// on the backend.
    pub max_profile_events: u64,
    /// Most bytes one profile's own buffers may take (`MEMO_MAX_PROFILE_BYTES`); past it
    /// the profile is abandoned likewise.
    pub max_profile_bytes: u64,
    /// A replayed key whose passes miss more than this share of allocations over
    /// [`Config::miss_window`] passes is profiled again.
    pub replan_miss_ratio: f64,
    /// Number of replayed passes over which misses are counted.
    pub miss_window: u32,
    /// New plans serve requests of at most this many bytes (size and alignment) from
    /// size-class lanes of the slab instead of planned slots (`MEMO_LANES`; default 256;
    /// 0: none, every request matched to a slot; else a power of two from 16 to 4096).
    /// See the crate's `lanes` module.
    pub lanes: u64,
    /// Most shape classes of one pass key, its own included (`MEMO_MAX_CLASSES`; default
    /// 8, at most 17; 1: none). A key whose passes come in several shapes gets a plan per
    /// shape, told apart by the sizes of each pass's first large requests; see the crate's
    /// documentation of shape classes.
    pub max_classes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Replay,
            strategy: OffsetStrategy::Best,
            planner: Planner::Background,
            trace_dir: None,
            plan_dir: None,
            backtrace: false,
            max_plans: 64,
            max_profile_events: 1 << 22,
            max_profile_bytes: 1 << 29,
            replan_miss_ratio: 0.05,
            miss_window: 3,
            lanes: 256,
            max_classes: 8,
        }
    }
}

impl Config {
    /// With [`Config::mode`] set to `mode`.
    pub fn with_mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// With [`Config::strategy`] set to `strategy`.
    pub fn with_strategy(mut self, strategy: OffsetStrategy) -> Config {
        self.strategy = strategy;
        self
    }

    /// With [`Config::planner`] set to `planner`.
    pub fn with_planner(mut self, planner: Planner) -> Config {
        self.planner = planner;
        self
    }

    /// With [`Config::trace_dir`] set to `dir`.
    pub fn with_trace_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.trace_dir = Some(dir.into());
        self
    }

    /// With [`Config::plan_dir`] set to `dir`.
    pub fn with_plan_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.plan_dir = Some(dir.into());
        self
    }

    /// With [`Config::backtrace`] set to `backtrace`.
    pub fn with_backtrace(mut self, backtrace: bool) -> Config {
        self.backtrace = backtrace;
        self
    }

    /// With [`Config::max_plans`] set to `n`.
    pub fn with_max_plans(mut self, n: usize) -> Config {
        self.max_plans = n;
        self
    }

    /// With [`Config::max_profile_events`] set to `n`.
    pub fn with_max_profile_events(mut self, n: u64) -> Config {
        self.max_profile_events = n;
        self
    }

    /// With [`Config::max_profile_bytes`] set to `n`.
    pub fn with_max_profile_bytes(mut self, n: u64) -> Config {
        self.max_profile_bytes = n;
        self
    }

    /// With [`Config::replan_miss_ratio`] set to `ratio`.
    pub fn with_replan_miss_ratio(mut self, ratio: f64) -> Config {
        self.replan_miss_ratio = ratio;
        self
    }

    /// With [`Config::miss_window`] set to `passes`.
    pub fn with_miss_window(mut self, passes: u32) -> Config {
        self.miss_window = passes;
        self
    }

    /// With [`Config::lanes`] set to `bytes`.
    pub fn with_lanes(mut self, bytes: u64) -> Config {
        self.lanes = bytes;
        self
    }

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
        if let Ok(v) = std::env::var("MEMO_PLANNER") {
            match Planner::parse(&v) {
                Some(p) => c.planner = p,
                None => eprintln!(
                    "memomalloc: MEMO_PLANNER={v:?} is not background or inline; using background"
                ),
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
        for (var, field) in [
            ("MEMO_MAX_PROFILE_EVENTS", &mut c.max_profile_events),
            ("MEMO_MAX_PROFILE_BYTES", &mut c.max_profile_bytes),
        ] {
            if let Ok(v) = std::env::var(var) {
                match v.trim().parse::<u64>() {
                    Ok(n) if n > 0 => *field = n,
                    _ => eprintln!("memomalloc: {var}={v:?} is not a positive number"),
                }
            }
        }
        if let Ok(v) = std::env::var("MEMO_MAX_CLASSES") {
            match v.trim().parse::<usize>() {
                Ok(n) if (1..=17).contains(&n) => c.max_classes = n,
                _ => eprintln!("memomalloc: MEMO_MAX_CLASSES={v:?} is not a number from 1 to 17"),
            }
        }
        if let Ok(v) = std::env::var("MEMO_LANES") {
            match v.trim().parse::<u64>() {
                Ok(n) if crate::memory::lane_classes::valid_max(n) => c.lanes = n,
                _ => eprintln!(
                    "memomalloc: MEMO_LANES={v:?} is not 0 or a power of two from 16 to 4096"
                ),
            }
        }
        c
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets the configuration before the first pass. Returns `false` (and changes nothing) if
/// the configuration was already fixed, by an earlier call or by the first pass.
pub fn configure(config: Config) -> bool {
    // Setting the value moves it in: nothing is allocated, so no re-entrancy guard.
    CONFIG.set(config).is_ok()
}

/// The configuration in force (read from the environment on first use).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// [`Config::strategy`] as its name (`best`, `greedy-by-size`, ...), as `MEMO_STRATEGY`
/// takes it.
mod strategy_name {
    use memo_planner::OffsetStrategy;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(s: &OffsetStrategy, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(s.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetStrategy, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}
