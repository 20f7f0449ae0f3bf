//! The tests' own helpers, checked without starting the harness: the
//! command line of a short run (`common::short_run`), whose base flags each
//! test may replace or leave out but never gives twice.

use crate::common;

use std::path::Path;

use common::*;

#[test]
fn a_short_run_gives_each_base_flag_once_with_the_tests_value() {
    let out = Path::new("/tmp/gvr-out");
    let base = short_run(out).to_args().join(" ");
    assert_eq!(base, "--qps 20 --duration 1s --warmup 0s --delay 20ms --quiet --out /tmp/gvr-out");
    // A base flag the test names keeps its place with the test's value; the
    // test's other flags follow the base in its order, one value with spaces
    // one argument.
    let run = short_run(out).flags("--transport both --qps 40").args(&["--fail-if", "p99 > 1ms", "--delay", "5ms"]);
    let args = run.to_args();
    assert_eq!(
        args.join(" "),
        "--qps 40 --duration 1s --warmup 0s --delay 5ms --transport both --fail-if p99 > 1ms --quiet --out /tmp/gvr-out"
    );
    assert_eq!(args[11], "p99 > 1ms", "{args:?}");
}

#[test]
fn a_short_run_leaves_out_a_base_flag_until_the_test_names_it() {
    let out = Path::new("/tmp/gvr-out");
    let closed = short_run(out).without("--qps").without("--quiet").flags("--connections 4");
    assert_eq!(closed.to_args().join(" "), "--duration 1s --warmup 0s --delay 20ms --connections 4 --out /tmp/gvr-out");
    let again = closed.flags("--quiet --qps 5").to_args().join(" ");
    assert_eq!(again, "--qps 5 --duration 1s --warmup 0s --delay 20ms --connections 4 --quiet --out /tmp/gvr-out");
}
