//! How every renderer writes a figure: fixed decimals, or `n/a` where it was
//! not measured. It names no other exporter, so any of them may use it.

/// A number with fixed decimals, or `n/a` where it was not measured.
pub fn num(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "n/a".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::num;

    #[test]
    fn a_figure_has_fixed_decimals_and_one_not_measured_is_n_a() {
        assert_eq!(num(Some(2.0 / 3.0), 2), "0.67");
        assert_eq!(num(Some(1500.0), 0), "1500");
        assert_eq!(num(None, 1), "n/a");
        assert_eq!(num(Some(f64::NAN), 1), "n/a");
        assert_eq!(num(Some(f64::INFINITY), 0), "n/a");
    }
}
