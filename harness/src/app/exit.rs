//! The exit codes, and the one function that maps a run's end onto them.

use crate::result::RunStatus;

/// Every round ran to its end and the folder was written.
pub const EXIT_OK: u8 = 0;
/// A tier failed to start or died, or the folder could not be written.
pub const EXIT_FAILED: u8 = 1;
/// Bad flags: nothing started, nothing written.
pub const EXIT_USAGE: u8 = 2;
/// A CI gate (`--fail-if`, `--fail-on-invalid`) was breached; the folder was
/// written. k6 uses the same code for its thresholds.
pub const EXIT_GATE: u8 = 99;
/// Interrupted by Ctrl-C: the partial report was written.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit code of a run (or sweep) that ended with `status`; `written`
/// says whether its folder was written.
pub fn exit_code(status: RunStatus, written: bool) -> u8 {
    match (status, written) {
        (_, false) => EXIT_FAILED,
        (RunStatus::Complete, _) => EXIT_OK,
        (RunStatus::Interrupted, _) => EXIT_INTERRUPTED,
        (RunStatus::Aborted, _) => EXIT_FAILED,
    }
}

/// The exit code once the gates are evaluated: a run that would exit 0
/// exits [`EXIT_GATE`] when `breaches` gates were breached. A failed or
/// interrupted run keeps its own code.
pub fn with_gates(code: u8, breaches: usize) -> u8 {
    if code == EXIT_OK && breaches > 0 { EXIT_GATE } else { code }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritten_folder_fails_whatever_the_status() {
        assert_eq!(exit_code(RunStatus::Complete, true), 0);
        assert_eq!(exit_code(RunStatus::Interrupted, true), 130);
        assert_eq!(exit_code(RunStatus::Aborted, true), 1);
        for status in [RunStatus::Complete, RunStatus::Interrupted, RunStatus::Aborted] {
            assert_eq!(exit_code(status, false), 1);
        }
    }

    #[test]
    fn a_breached_gate_turns_success_into_99_only() {
        assert_eq!(with_gates(EXIT_OK, 0), EXIT_OK);
        assert_eq!(with_gates(EXIT_OK, 2), EXIT_GATE);
        assert_eq!(with_gates(EXIT_INTERRUPTED, 1), EXIT_INTERRUPTED);
        assert_eq!(with_gates(EXIT_FAILED, 1), EXIT_FAILED);
    }
}
