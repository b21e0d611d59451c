//! Why a command did not succeed, and the exit status that says so.
//!
//! Two kinds of failure get two codes, whatever the output format:
//! - [`EXIT_USAGE`] (2, clap's own code for usage errors): the command could not do what
//!   was asked. The command line is wrong, or a file it names cannot be used: an input
//!   that cannot be read or is malformed, an output that cannot be written. A malformed
//!   input is in this class because it is the caller's to fix, like a mistyped flag, and
//!   no result was computed from it: a script that reads 1 as "the answer is no" must not
//!   take a typo in a CSV file for a "no".
//! - [`EXIT_FAILED`] (1): the command ran on a good input and its result is a failure: a
//!   strategy made an invalid plan, or `plan --capacity` found no plan of that height.

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::CommandFactory;

use crate::args::Cli;

/// Exit status of a result that failed.
pub const EXIT_FAILED: u8 = 1;

/// Exit status of a usage error or a file that cannot be used (clap exits with it too).
pub const EXIT_USAGE: u8 = 2;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// Flags of `subcommand` that do not go together; reported as clap reports its own
    /// usage errors, with the subcommand's usage line.
    Usage {
        /// The subcommand's name.
        subcommand: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A file named on the command line cannot be used: unreadable or malformed input,
    /// an output that cannot be written.
    BadFile(String),
    /// The command ran and its result is a failure.
    Failed(String),
}

impl Failure {
    /// The exit status of this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage { .. } | Failure::BadFile(_) => EXIT_USAGE,
            Failure::Failed(_) => EXIT_FAILED,
        }
    }

    /// Says what failed on standard error and returns the exit status.
    pub fn report(&self) -> ExitCode {
        match self {
            Failure::Usage {
                subcommand,
                message,
            } => {
                let mut cli = Cli::command();
                cli.build();
                let error = match cli.find_subcommand_mut(subcommand) {
                    Some(sub) => sub.error(ErrorKind::ArgumentConflict, message),
                    None => cli.error(ErrorKind::ArgumentConflict, message),
                };
                // Nothing more can be said when standard error is closed.
                let _ = error.print();
            }
            Failure::BadFile(message) | Failure::Failed(message) => eprintln!("memo: {message}"),
        }
        ExitCode::from(self.exit_code())
    }
}
