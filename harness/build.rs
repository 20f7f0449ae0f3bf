//! Records how this harness was built, so a run can say whether its figures
//! come from optimised code: the optimisation level and the profile's name.

fn main() {
    for var in ["OPT_LEVEL", "PROFILE"] {
        println!("cargo:rerun-if-env-changed={var}");
        let value = std::env::var(var).unwrap_or_else(|_| "unknown".to_owned());
        println!("cargo:rustc-env=HARNESS_BUILD_{var}={value}");
    }
}
