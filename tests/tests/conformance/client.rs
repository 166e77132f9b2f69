//! Our Streamable HTTP client against the suite's client mode: for each client scenario (see
//! each release's `CLIENTS`), `conformance client --command <conformance_client> --scenario
//! NAME --spec-version REV` starts the scenario's server and runs the runtime's
//! `conformance_client` example against it (`cancelkit::http::client::HttpClient` and a
//! `Peer`). Every applicable check must pass, and the client must exit 0 within the CLI's
//! timeout.

use crate::scenarios::KnownFailure;
use crate::suite::{Job, Outcome, Suite};

/// The example's known bugs.
const CLIENT_BUGS: &[KnownFailure] = &[];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn the_conformance_client_example_passes_the_client_scenarios() {
    let suite = Suite::install();
    // The features the `mcp_server` example is built with, so the runtime is built once.
    let client =
        cancelkit_tests::example_with_features("conformance_client", &["http", "mcp-server"]);
    let command = client.to_str().expect("a UTF-8 path").to_owned();
    // The CLI splits the command at spaces and runs it through a shell.
    assert!(
        !command.contains(char::is_whitespace),
        "the example's path has a space, which the CLI's --command cannot take: {command}"
    );
    let out = tempfile::tempdir().expect("a temporary directory");
    let mut outcome = Outcome::new("the conformance_client example", &command, CLIENT_BUGS);
    outcome.client_exit = true;
    let runs = suite
        .run_jobs(Job::all(|r| r.clients), out.path(), |job| {
            let args = [
                "client",
                "--command",
                &command,
                "--scenario",
                job.scenario.name,
                "--spec-version",
                job.revision,
            ];
            args.map(Into::into).to_vec()
        })
        .await;
    for (job, run) in runs {
        outcome.judge(&job, run);
    }
    outcome.assert_passed(None);
}
