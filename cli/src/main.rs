//! The `cancelkit` command.
//!
//! * `cancelkit trace [--out FILE] -- CMD [ARGS...]` runs CMD behind a transparent stdio proxy
//!   that records the session as JSON lines.
//! * `cancelkit trace view FILE [-o timeline.html]` renders such a trace as an HTML timeline.

use std::ffi::OsString;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use cancelkit_cli::{trace, view};
use clap::{Parser, Subcommand};

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
