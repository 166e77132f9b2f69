//! `cargo xtask bench [NAME...]`: builds the benchmark binary in release mode and runs it.

pub fn main(names: &[&str]) -> Result<(), String> {
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
