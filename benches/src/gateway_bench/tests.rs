//! The gateway benchmark's configs, read by the gateway's own config loader: each must start a
//! worker that lets the bench do what it does (one user's thousands of calls, 2,000
//! connections from 127.0.0.1, an admin's cancels), or the bench dies after its build.

use std::time::Duration;

use cancelkit_gateway::config::{Config, Overrides};

use super::measure::metric_sum;
use super::worker::demo_config;
use super::{IN_FLIGHT_RUNS, capped, lookups};

fn parse(text: &str) -> Config {
    Config::from_parts("bench config", text, |_| None, &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn permissions(config: &Config, sub: &str) -> Vec<String> {
    config
        .auth
        .permissions
        .get(sub)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn every_worker_config_lets_one_admin_run_the_bench_from_one_address() {
    for text in [demo_config(&[]), lookups::config(), capped::config()] {
        let config = parse(&text);
        let limits = &config.limits;
        for (key, value) in [
            ("max_runs", limits.max_runs),
            ("max_runs_per_user", limits.max_runs_per_user),
            ("max_upstream_calls", limits.max_upstream_calls),
            (
                "max_upstream_calls_per_user",
                limits.max_upstream_calls_per_user,
            ),
            (
                "max_connections_per_ip",
                // Unset, it is a sixteenth of the connections in force.
                config
                    .connections
                    .max_connections_per_ip
                    .unwrap_or(config.connections.max_connections / 16),
            ),
        ] {
            assert!(
                value >= IN_FLIGHT_RUNS,
                "{key} = {value} is below the bench's {IN_FLIGHT_RUNS}:\n{text}"
            );
        }
        let admin = permissions(&config, "admin");
        for needed in ["admin.system_config", "tools.execute"] {
            assert!(
                admin.iter().any(|p| p == needed),
                "admin lacks {needed}:\n{text}"
            );
        }
    }
}

#[test]
fn the_lookups_worker_keeps_every_filled_run_for_the_hour() {
    let config = parse(&lookups::config());
    assert_eq!(config.limits.max_retained, lookups::RETAINED);
    assert_eq!(config.limits.max_retained_per_user, lookups::RETAINED);
    assert_eq!(
        config.cancellation.status_retention,
        Duration::from_secs(3600)
    );
    for user in 0..lookups::FILL_USERS {
        assert_eq!(
            permissions(&config, &format!("bench-user-{user}")),
            ["tools.execute"]
        );
    }
}

#[test]
fn the_capped_worker_caps_connections_at_the_step_s_count() {
    let config = parse(&capped::config());
    assert_eq!(config.connections.max_connections, capped::CAP);
    assert_eq!(config.connections.max_connections_per_ip, Some(capped::CAP));
    assert!(config.connections.header_timeout >= Duration::from_secs(60));
}

#[test]
fn an_extra_line_replaces_the_key_its_section_sets() {
    let text = demo_config(&[("connections", "max_connections_per_ip = 7")]);
    assert_eq!(text.matches("max_connections_per_ip").count(), 1, "{text}");
    assert_eq!(parse(&text).connections.max_connections_per_ip, Some(7));
}

#[test]
fn metric_sums_add_every_series_of_one_name_only() {
    let text = "# TYPE cancelkit_gateway_runs_finished_total counter\n\
                cancelkit_gateway_runs_finished_total{outcome=\"completed\"} 10\n\
                cancelkit_gateway_runs_finished_total{outcome=\"cancelled\"} 5\n\
                cancelkit_gateway_runs_finished_totals 100\n\
                cancelkit_gateway_connections 3\n\
                cancelkit_gateway_connections_refused_total 9\n";
    assert_eq!(
        metric_sum(text, "cancelkit_gateway_runs_finished_total"),
        15.0
    );
    assert_eq!(metric_sum(text, "cancelkit_gateway_connections"), 3.0);
    assert_eq!(metric_sum(text, "cancelkit_gateway_absent"), 0.0);
}
