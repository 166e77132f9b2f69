//! The `cancelkit` command.
//!
//! * `cancelkit trace [--out FILE] -- CMD [ARGS...]` runs CMD behind a transparent stdio proxy
//!   that records the session as JSON lines.
//! * `cancelkit trace view FILE [-o timeline.html]` renders such a trace as an HTML timeline.
//! * `cancelkit check mcp [OPTIONS] -- CMD [ARGS...]` runs cancellation scenarios against a
//!   stdio MCP server; `cancelkit check mcp [OPTIONS] --url URL` against a running Streamable
//!   HTTP one.
//! * `cancelkit check acp [OPTIONS] -- CMD [ARGS...]` runs cancellation scenarios against a
//!   stdio ACP agent.

use std::ffi::OsString;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cancelkit_cli::check::acp::{AcpOptions, DEFAULT_PROMPT};
use cancelkit_cli::check::acp_session::Permission;
use cancelkit_cli::check::baseline::Baseline;
use cancelkit_cli::check::{self, Options, Report, Unreachable};
use cancelkit_cli::{trace, view};
use cancelkit_wire::McpRevision;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;

/// cancelkit's command-line tools.
#[derive(Debug, Parser)]
#[command(name = "cancelkit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run CMD behind a transparent stdio proxy that records every frame in both directions.
    ///
    /// Put `cancelkit trace --out FILE --` in front of an MCP server's or ACP agent's command in
    /// a client's configuration. Bytes pass unchanged; stderr is the child's own; the exit code
    /// is the child's (128 + N when it was killed by signal N, 2 when it cannot be started).
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Trace {
        #[command(subcommand)]
        view: Option<TraceCommand>,
        /// Where to write the trace (default: cancelkit-trace-SECONDS.jsonl, SECONDS since the Unix
        /// epoch, in the current directory).
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The server or agent to run, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Run cancellation scenarios against a server and report what the specification asks.
    Check {
        #[command(subcommand)]
        target: CheckCommand,
    },
}

#[derive(Debug, Subcommand)]
enum CheckCommand {
    /// Start CMD as a stdio MCP server (or talk Streamable HTTP to the one at --url) and check
    /// how it handles cancellation.
    ///
    /// Over HTTP at 2026-07-28 a cancel closes the request's response stream; at older
    /// revisions it is a POSTed `notifications/cancelled`.
    ///
    /// Exit code: 0 when every MUST and SHOULD check passes, 1 when one fails (with
    /// --musts-only, MUSTs alone decide; with --baseline, a listed check fails as expected and
    /// a listed check that passes fails the run), 2 when the server cannot be started or
    /// reached or does not complete the handshake (or the baseline is malformed or names an
    /// unknown check), 130 on Ctrl-C (128 + N on signal N: SIGTERM, SIGHUP). The server's
    /// whole process group is stopped at the end.
    Mcp(Box<McpArgs>),
    /// Start CMD as a stdio ACP agent and check how it handles `$/cancel_request`, the ACP RFD
    /// draft's `$/cancelRequest` and `session/cancel`.
    ///
    /// The --prompt turn runs once uncancelled first, to measure it; every verdict is judged
    /// against that. While a turn runs the agent's requests to the client are held; after a
    /// `$/cancel_request` one is answered (as --permission says) only if the agent still waits
    /// for it --timeout later; after `session/cancel` they are answered `cancelled`.
    ///
    /// Exit code: 0 when every MUST and SHOULD check passes (with --musts-only, MUSTs alone
    /// decide; with --baseline, as for `check mcp`), 1 when one fails, 2 when the agent cannot
    /// be started or does not answer `initialize` and `session/new` (or the baseline is
    /// malformed or names an unknown check), 130 on Ctrl-C (128 + N on signal N: SIGTERM,
    /// SIGHUP). The agent's whole process group is stopped at the end.
    Acp(Box<AcpArgs>),
}

#[derive(Debug, Args)]
struct AcpArgs {
    /// The text of the slow `session/prompt`, cancelled in each scenario. cancelkit's example
    /// agent streams for N seconds on `sleep N` and asks for permission on `ask`.
    #[arg(long, default_value = DEFAULT_PROMPT, value_name = "TEXT")]
    prompt: String,
    /// How long each wait for an answer lasts, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = seconds_arg, value_name = "S")]
    timeout: f64,
    /// The user's decision the check plays when the agent asks for permission outside a
    /// `session/cancel` (after one, the answer is `cancelled`, as ACP requires): while a
    /// cancelled turn runs the request is held, and answered this way only if the agent still
    /// waits for it --timeout after the cancel.
    #[arg(long, value_enum, default_value = "reject", value_name = "DECISION")]
    permission: Permission,
    #[command(flatten)]
    outputs: OutputArgs,
    /// Write the agent's stderr to FILE (created or truncated) instead of discarding it.
    #[arg(long, value_name = "FILE")]
    stderr: Option<PathBuf>,
    /// Only the MUST checks decide the exit code.
    #[arg(long)]
    musts_only: bool,
    /// The agent to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// What a check run writes besides its table, and the baseline it is judged by (both targets).
#[derive(Debug, Args)]
struct OutputArgs {
    /// Also write the full report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write the report as JUnit XML to FILE: one testcase per check.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Expected failures: a YAML file listing check ids under `mcp:` (for `check mcp`) or
    /// `acp:` (for `check acp`). A listed check that fails does not fail the run; one that
    /// passes does, until it is removed from FILE.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct McpArgs {
    /// Only list the server's tools (name, whether it runs as a task, description, arguments),
    /// then exit.
    #[arg(long)]
    list_tools: bool,
    /// Speak this revision instead of negotiating the newest one the server speaks.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(McpRevision::VERSIONS))]
    revision: Option<String>,
    /// The slow tool, called and cancelled.
    #[arg(long, default_value = "sleep", value_name = "NAME")]
    tool: String,
    /// The slow tool's arguments (JSON), checked against the tool's input schema and sent as
    /// given in every scenario; how long the call lasts is measured before the scenarios.
    #[arg(long, default_value = r#"{"seconds": 5}"#, value_parser = json_arg, value_name = "JSON")]
    args: Value,
    /// A fast tool, called to see that the server still serves (default: a tools/list request).
    #[arg(long, value_name = "NAME")]
    fast_tool: Option<String>,
    /// The fast tool's arguments (JSON).
    #[arg(long, default_value = "{}", value_parser = json_arg, value_name = "JSON")]
    fast_args: Value,
    /// How long each wait for an answer lasts, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = seconds_arg, value_name = "S")]
    timeout: f64,
    #[command(flatten)]
    outputs: OutputArgs,
    /// Write the server's stderr to FILE (created or truncated) instead of discarding it.
    #[arg(long, value_name = "FILE", conflicts_with = "url")]
    stderr: Option<PathBuf>,
    /// Only the MUST checks decide the exit code.
    #[arg(long)]
    musts_only: bool,
    /// A running Streamable HTTP MCP server's endpoint (http:// or https://), instead of a
    /// command.
    #[arg(long, value_name = "URL", value_parser = url_arg)]
    url: Option<String>,
    /// With an https:// --url: also trust the certificates of this PEM CA file, beside the
    /// platform's roots (and the file SSL_CERT_FILE names).
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    ca_file: Option<PathBuf>,
    /// A header sent with every HTTP request (with --url), as `Name: value`, such as
    /// `Authorization: Bearer TOKEN`; repeatable.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = header_arg, conflicts_with = "command")]
    headers: Vec<(String, String)>,
    /// The server to run, after `--`.
    #[arg(
        last = true,
        required_unless_present = "url",
        conflicts_with = "url",
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

fn url_arg(text: &str) -> Result<String, String> {
    match text.split_once("://") {
        Some(("http" | "https", rest)) if !rest.is_empty() => Ok(text.to_owned()),
        _ => Err("an http:// or https:// URL, such as http://127.0.0.1:8000/mcp".into()),
    }
}

fn header_arg(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or("`Name: value`, such as `Authorization: Bearer TOKEN`")?;
    let (name, value) = (name.trim(), value.trim());
    check::valid_header(name, value)?;
    Ok((name.to_owned(), value.to_owned()))
}

fn json_arg(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

fn seconds_arg(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err("a number of seconds between 0 and 3600".into()),
    }
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Render a trace as a self-contained HTML timeline of its requests and cancels.
    View {
        /// The trace file.
        file: PathBuf,
        /// Where to write the page (default: FILE with the extension .html).
        #[arg(short, long, value_name = "HTML")]
        output: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Trace {
            view: None,
            out,
            command,
        } => {
            let code = trace::run(out, &command);
            // the code of a child that exited normally is 0..=255; 128 + signal fits too
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Command::Trace {
            view: Some(TraceCommand::View { file, output }),
            ..
        } => render(file, output),
        Command::Check {
            target: CheckCommand::Mcp(args),
        } => check_mcp(*args),
        Command::Check {
            target: CheckCommand::Acp(args),
        } => check_acp(*args),
    }
}

fn check_acp(args: AcpArgs) -> ExitCode {
    let outputs = Outputs {
        target: "acp",
        args: args.outputs,
    };
    let baseline = match outputs.load_baseline() {
        Ok(baseline) => baseline,
        Err(code) => return code,
    };
    let options = AcpOptions {
        prompt: args.prompt,
        timeout: Duration::from_secs_f64(args.timeout),
        permission: args.permission,
        musts_only: args.musts_only,
        stderr: args.stderr,
    };
    let started = Instant::now();
    let report = check::run_acp(&options, &args.command);
    outputs.finish(report, started.elapsed(), baseline)
}

fn check_mcp(args: McpArgs) -> ExitCode {
    let outputs = Outputs {
        target: "mcp",
        args: args.outputs,
    };
    let baseline = match outputs.load_baseline() {
        Ok(baseline) => baseline,
        Err(code) => return code,
    };
    let options = Options {
        url: args.url,
        headers: args.headers,
        ca_file: args.ca_file,
        revision: args.revision,
        tool: args.tool,
        args: args.args,
        fast_tool: args.fast_tool,
        fast_args: args.fast_args,
        timeout: Duration::from_secs_f64(args.timeout),
        musts_only: args.musts_only,
        stderr: args.stderr,
    };
    if args.list_tools {
        return match check::list_mcp_tools(&options, &args.command) {
            Ok(table) => {
                print!("{table}");
                ExitCode::SUCCESS
            }
            Err(Unreachable(why)) => {
                eprintln!("cancelkit check mcp: {why}");
                ExitCode::from(2)
            }
        };
    }
    let started = Instant::now();
    let report = check::run_mcp(&options, &args.command);
    outputs.finish(report, started.elapsed(), baseline)
}

/// What a check run of `target` writes besides its table, and the baseline it is judged by.
struct Outputs {
    target: &'static str,
    args: OutputArgs,
}

impl Outputs {
    /// The baseline, read before the run so a malformed one costs no run (exit code 2).
    fn load_baseline(&self) -> Result<Option<Baseline>, ExitCode> {
        let Some(path) = &self.args.baseline else {
            return Ok(None);
        };
        Baseline::load(path, self.target)
            .map(Some)
            .map_err(|why| self.fail(&why))
    }

    /// Prints the report's table, writes its JSON and JUnit XML, and gives the exit code: 0
    /// pass, 1 fail, 2 no run (or a baseline that names unknown checks, or a file that cannot
    /// be written), 128 + N when signal N interrupted the run.
    fn finish(
        &self,
        report: Result<Report, Unreachable>,
        elapsed: Duration,
        baseline: Option<Baseline>,
    ) -> ExitCode {
        let mut report = match report {
            Ok(report) => report,
            Err(Unreachable(why)) => {
                eprintln!("cancelkit check {}: {why}", self.target);
                let signal = check::wire::stdio::interrupted();
                return ExitCode::from(
                    signal.and_then(|n| u8::try_from(128 + n).ok()).unwrap_or(2),
                );
            }
        };
        let applied = match baseline.map(|b| b.apply(&mut report)).transpose() {
            Ok(applied) => applied,
            Err(why) => return self.fail(&why),
        };
        print!("{}", report.table(applied.as_ref()));
        if let Some(stale) = applied
            .as_ref()
            .and_then(cancelkit_cli::check::baseline::Applied::stale_message)
        {
            eprintln!("cancelkit check {}: {stale}", self.target);
        }
        if let Some(path) = &self.args.json {
            let json = report.json(applied.as_ref()).map_err(std::io::Error::other);
            if let Err(e) = json.and_then(|json| std::fs::write(path, json)) {
                return self.fail(&format!("cannot write {}: {e}", path.display()));
            }
        }
        if let Some(path) = &self.args.junit {
            let xml = check::junit::render(&report, applied.as_ref(), elapsed);
            if let Err(e) = std::fs::write(path, xml) {
                return self.fail(&format!("cannot write {}: {e}", path.display()));
            }
        }
        ExitCode::from(report.exit_code())
    }

    /// Says why, and exit code 2.
    fn fail(&self, why: &str) -> ExitCode {
        eprintln!("cancelkit check {}: {why}", self.target);
        ExitCode::from(2)
    }
}

fn render(file: PathBuf, output: Option<PathBuf>) -> ExitCode {
    let output = output.unwrap_or_else(|| file.with_extension("html"));
    let timeline = match File::open(&file).and_then(|f| view::analyze(BufReader::new(f))) {
        Ok(timeline) => timeline,
        Err(e) => {
            eprintln!("cancelkit trace view: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let title = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    if let Err(e) = std::fs::write(&output, view::render(&timeline, &title)) {
        eprintln!(
            "cancelkit trace view: cannot write {}: {e}",
            output.display()
        );
        return ExitCode::from(2);
    }
    eprintln!(
        "cancelkit trace view: {} requests -> {}",
        timeline.rows.len(),
        output.display()
    );
    ExitCode::SUCCESS
}
