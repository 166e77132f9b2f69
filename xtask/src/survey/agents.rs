//! The surveyed agents: how each is started, and the configuration that points it at the mock
//! and keeps it offline, written into a fresh home.

use std::path::{Path, PathBuf};

use super::mock::Answer;
use super::{anthropic, gemini, openai};

/// One of the pinned agents of `xtask/survey/package.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `@zed-industries/codex-acp` 0.16.0 (codex 0.137, a Rust binary).
    Codex,
    /// `@google/gemini-cli` 0.61.0, run with `--acp`.
    Gemini,
    /// `@zed-industries/claude-agent-acp` 0.23.1 (Claude Code 2.1.83 through its agent SDK).
    Claude,
}

/// How to start one agent: the whole environment (nothing else is inherited) and the command.
pub struct Launch {
    /// The environment variables, the only ones the agent sees.
    pub env: Vec<(String, String)>,
    /// The program and its arguments.
    pub command: Vec<String>,
}

/// The API key every agent is given: the mock takes any.
const KEY: &str = "survey-key";

impl Agent {
    /// Every agent, in the order the survey runs them.
    pub const ALL: [Agent; 3] = [Agent::Codex, Agent::Gemini, Agent::Claude];

    /// The agent's short name in file names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Claude => "claude",
        }
    }

    /// Its npm package (pinned in `xtask/survey/package.json`).
    pub fn package(self) -> &'static str {
        match self {
            Agent::Codex => "@zed-industries/codex-acp",
            Agent::Gemini => "@google/gemini-cli",
            Agent::Claude => "@zed-industries/claude-agent-acp",
        }
    }

    /// The agent named `name`, if any.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The model API the agent's client speaks.
    pub fn api(self) -> Answer {
        match self {
            Agent::Codex => openai::answer,
            Agent::Gemini => gemini::answer,
            Agent::Claude => anthropic::answer,
        }
    }

    /// Writes the agent's configuration into `home` (a fresh directory, the agent's `HOME`) and
    /// returns how to start it against the mock at `url`; `node` holds the installed
    /// `node_modules`.
    pub fn launch(self, url: &str, home: &Path, node: &Path) -> Result<Launch, String> {
        let modules = node.join("node_modules");
        let mut env = vec![
            ("HOME".to_owned(), path(home)),
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("TERM".to_owned(), "dumb".to_owned()),
            ("NO_COLOR".to_owned(), "1".to_owned()),
        ];
        let mut set = |name: &str, value: &str| env.push((name.to_owned(), value.to_owned()));
        let command = match self {
            Agent::Codex => {
                let codex_home = home.join(".codex");
                write(&codex_home.join("config.toml"), &codex_config(url))?;
                set("CODEX_HOME", &path(&codex_home));
                set("SURVEY_API_KEY", KEY);
                vec![path(&codex_binary(&modules)?)]
            }
            Agent::Gemini => {
                write(&home.join(".gemini").join("settings.json"), GEMINI_SETTINGS)?;
                set("GEMINI_API_KEY", KEY);
                set("GOOGLE_GEMINI_BASE_URL", url);
                // Without it gemini-cli re-spawns itself (to raise the heap limit) and the
                // parent ignores SIGINT and SIGTERM: the survey wants the agent itself on stdio.
                set("GEMINI_CLI_NO_RELAUNCH", "true");
                let script = modules.join("@google/gemini-cli/bundle/gemini.js");
                vec!["node".to_owned(), path(&script), "--acp".to_owned()]
            }
            Agent::Claude => {
                set("ANTHROPIC_BASE_URL", url);
                set("ANTHROPIC_API_KEY", KEY);
                // claude-agent-acp offers bypassPermissions as root only with IS_SANDBOX set,
                // and Claude Code refuses --dangerously-skip-permissions as root without it.
                set("IS_SANDBOX", "1");
                set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
                set("DISABLE_TELEMETRY", "1");
                set("DISABLE_ERROR_REPORTING", "1");
                set("DISABLE_AUTOUPDATER", "1");
                set("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1");
                let script = modules.join("@zed-industries/claude-agent-acp/dist/index.js");
                vec!["node".to_owned(), path(&script)]
            }
        };
        Ok(Launch { env, command })
    }
}

/// codex's `config.toml`: a custom model provider at the mock (the Responses API: codex 0.137
/// refuses `wire_api = "chat"`), no retries (a failure shows at once), approval asked for any
/// command not known to be safe (so the permission mode's `touch` is asked about), no update
/// check, analytics or feedback uploads.
fn codex_config(url: &str) -> String {
    format!(
        r#"model = "gpt-5.4"
model_provider = "survey"
approval_policy = "untrusted"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.survey]
name = "cancelkit survey mock"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "SURVEY_API_KEY"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"
"#
    )
}

/// gemini-cli's `~/.gemini/settings.json`: the API-key auth (the key and base URL come from the
/// environment), no folder-trust prompt, no usage statistics, telemetry or update checks.
const GEMINI_SETTINGS: &str = r#"{
  "security": {
    "auth": {"selectedType": "gemini-api-key"},
    "folderTrust": {"enabled": false}
  },
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
}
"#;

/// codex-acp's native binary for this machine (the npm package's `bin/codex-acp.js` only
/// spawns it, and a wrapper between the client and the agent would hide the agent's exit).
fn codex_binary(modules: &Path) -> Result<PathBuf, String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => return Err(format!("codex-acp has no linux build for {other}")),
    };
    let binary = modules
        .join("@zed-industries")
        .join(format!("codex-acp-linux-{arch}"))
        .join("bin")
        .join("codex-acp");
    if binary.exists() {
        Ok(binary)
    } else {
        Err(format!("{} is missing", binary.display()))
    }
}

fn write(file: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn path(path: &Path) -> String {
    path.display().to_string()
}
