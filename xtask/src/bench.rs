//! `cargo xtask bench [NAME...]`: builds the benchmark binary in release mode and runs it.

pub fn main(names: &[&str]) -> Result<(), String> {
    if names.is_empty() || names.contains(&"gateway") {
        // The gateway benchmark runs the gateway binary (release) beside the bench binary.
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
