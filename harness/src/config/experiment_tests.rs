use super::*;
use crate::config::matrix::Cell;

/// The flags these tests know: `quiet` is a switch, the others take values.
fn kind(flag: &str) -> Option<bool> {
    match flag {
        "quiet" | "h2c" => Some(false),
        "qps" | "items" | "transport" | "duration" | "connections" | "delay" => Some(true),
        _ => None,
    }
}

fn args(cell: &Cell) -> String {
    cell.args.join(" ")
}

#[test]
fn the_base_becomes_flags_and_crossed_axes_every_pair() {
    let text = "transport = [\"grpc\", \"rest\"]\nqps = 100\nduration = \"10s\"\nquiet = true\n\n\
                [[axis]]\nflag = \"items\"\nvalues = [1, 10]\n\n[[axis]]\nflag = \"connections\"\nvalues = [1, 8]\n";
    let plan = parse(text, &kind).unwrap();
    let cells = plan.cells().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(args(&cells[0]), "--transport grpc,rest --qps 100 --duration 10s --quiet --items 1 --connections 1");
    assert_eq!(args(&cells[3]), "--transport grpc,rest --qps 100 --duration 10s --quiet --items 10 --connections 8");
    assert_eq!(cells[1].id, "02-items-1-connections-8");
    assert_eq!(cells[2].values, [("items".to_owned(), "10".to_owned()), ("connections".to_owned(), "1".to_owned())]);
}

#[test]
fn zipped_axes_walk_together_and_must_have_one_length() {
    let text = "[[axis]]\nflag = \"items\"\nvalues = [1, 10]\nzip = true\n\n\
                [[axis]]\nflag = \"qps\"\nvalues = [50, 100]\nzip = true\n";
    let cells = parse(text, &kind).unwrap().cells().unwrap();
    let lines: Vec<String> = cells.iter().map(args).collect();
    assert_eq!(lines, ["--items 1 --qps 50", "--items 10 --qps 100"]);
    let uneven = text.replace("[50, 100]", "[50]");
    let errors = parse(&uneven, &kind).unwrap().cells().unwrap_err();
    assert_eq!(errors[0].line, Some(7));
    assert!(errors[0].problem.contains("one length"), "{errors:?}");
}

#[test]
fn every_error_is_named_with_its_line_and_key_at_once() {
    let text = "qps = 100\nbogus = 1\nquiet = \"yes\"\nout = \"x\"\n\n[[axis]]\nflag = \"items\"\nvalues = [1]\n\n\
                [[axis]]\nflag = \"items\"\nvalues = [2]\n\n[[axis]]\nflag = \"qps\"\nvalues = [1]\n";
    let errors = parse(text, &kind).unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.display("p.toml").to_string()).collect();
    assert!(shown.iter().any(|e| e.starts_with("p.toml:2: bogus: not a flag")), "{shown:?}");
    assert!(shown.iter().any(|e| e.starts_with("p.toml:3: quiet: --quiet is a switch")), "{shown:?}");
    assert!(shown.iter().any(|e| e.starts_with("p.toml:4: out: the plan decides")), "{shown:?}");
    assert!(
        shown.iter().any(|e| e.starts_with("p.toml:11: items: two axes on one flag (the other on line 7)")),
        "{shown:?}"
    );
    assert!(shown.iter().any(|e| e.starts_with("p.toml:15: qps: an axis on a flag the base sets too")), "{shown:?}");
    assert_eq!(errors.len(), 5, "{shown:?}");
}

#[test]
fn a_plan_is_bounded_in_bytes_and_cells() {
    let big = format!("# {}\n", "x".repeat(MAX_PLAN_BYTES));
    assert!(parse(&big, &kind).unwrap_err()[0].problem.contains("at most"));
    let many: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
    let text = format!(
        "[[axis]]\nflag = \"items\"\nvalues = [{0}]\n[[axis]]\nflag = \"qps\"\nvalues = [{0}]\n",
        many.join(", ")
    );
    let errors = parse(&text, &kind).unwrap().cells().unwrap_err();
    assert!(errors[0].problem.contains("400 cells"), "{errors:?}");
    assert!(parse("qps = \n", &kind).unwrap_err()[0].problem.starts_with("not TOML"));
}

#[test]
fn a_crossover_axis_has_a_range_a_row_and_probes_for_cells() {
    let text = "transport = \"grpc,rest\"\n[[axis]]\nflag = \"items\"\nfind = \"crossover\"\nrange = [1, 10000]\n\
                row = \"cpu_us_per_request.downstream\"\nresolution = 0.5\n";
    let plan = parse(text, &kind).unwrap();
    let (axis, find) = plan.crossover().unwrap();
    assert_eq!((axis.flag.as_str(), find.low, find.high, find.resolution), ("items", 1.0, 10000.0, 0.5));
    assert_eq!(plan.cells().unwrap().iter().map(args).collect::<Vec<_>>(), ["--transport grpc,rest"]);
    assert_eq!(args(&plan.probe(3, "40").unwrap()), "--transport grpc,rest --items 40");
    let bad = text.replace("range = [1, 10000]", "range = [10, 1]");
    assert_eq!(
        parse(&bad, &kind).unwrap_err()[0].display("f").to_string(),
        "f:5: range: two numbers above zero, lower first: range = [1, 10000]"
    );
}
