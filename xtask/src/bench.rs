//! `cargo xtask bench [NAME...] [--quick]`: builds the benchmark binary in release mode and runs
//! it (`--quick`: the short run of the benchmarks that have one).
//! `cargo xtask bench --readme`: runs it to render the tables of the guide's performance page from `target/bench/*.json`
//! (no benchmark runs, so the gateway is not built).

pub fn main(names: &[&str]) -> Result<(), String> {
    let readme = names.contains(&"--readme");
    if readme && names.len() > 1 {
        return Err("--readme takes no benchmark names".to_owned());
    }
    if !readme
        && (names.is_empty() || names.contains(&"gateway") || names.contains(&"http-gateway"))
    {
        // The gateway benchmarks run the gateway binary (release) beside the bench binary.
        let built = crate::cargo()
            .args([
                "build",
                "--release",
                "--locked",
                "--package",
                "cancelkit-gateway",
            ])
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !built.success() {
            return Err(format!("building cancelkit-gateway exited with {built}"));
        }
    }
    let status = crate::cargo()
        .args([
            "run",
            "--release",
            "--locked",
            "--package",
            "cancelkit-bench",
            "--",
        ])
        .args(names)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the benchmark exited with {status}"))
    }
}
