//! praxis-check: runs the real Praxis config loader and startup validation (praxis-proxy 0.5.3, the crates Praxis AI
//! main builds with) over praxis.yaml files, and prints `accept FILE` or `reject FILE: <Praxis's error>` for each.
//!
//! What runs is what `praxis --validate` runs in praxis-proxy 0.5.3 (src/commands.rs `load_and_validate_for_cli`):
//! `load_config` (YAML safety checks, serde with the config's deny_unknown_fields, `Config::validate`: listeners,
//! admin, clusters, insecure_options, chain references, body limits, runtime), `validate_log_overrides`, then
//! `resolve_pipelines` with the full filter registry: every built-in filter's own `from_config` (load_balancer and its
//! cluster/tls types, json_body_field, peer_identity_trust, ...), branch chains, terminal positions, body limits and
//! the pipeline ordering checks.
//!
//! Praxis AI's own filters (intelligent_route, provider_route, credential_inject, openai_responses_format) live in
//! praxis-proxy/ai, which is not published, so their `from_config` cannot run here. They are registered as stand-ins
//! that accept any config and declare to the pipeline checks only what the real filters declare (read at
//! praxis-proxy/ai filters/src/routing/{intelligent_route,provider_route}.rs: both `selects_cluster() == true` and
//! neither overrides `selected_clusters`). Their rules stay in the transcribed table of praxis-config.test.ts.
use std::{process::ExitCode, sync::Arc};

use async_trait::async_trait;
use praxis_filter::{FilterAction, FilterError, FilterFactory, FilterRegistry, HttpFilter, HttpFilterContext};

/// A Praxis AI filter the published crates do not contain, with the pipeline capabilities the real one declares.
struct AiStandIn {
    name: &'static str,
    selects_cluster: bool,
}

#[async_trait]
impl HttpFilter for AiStandIn {
    fn name(&self) -> &'static str {
        self.name
    }

    fn selects_cluster(&self) -> bool {
        self.selects_cluster
    }

    async fn on_request(&self, _ctx: &mut HttpFilterContext<'_>) -> Result<FilterAction, FilterError> {
        Ok(FilterAction::Continue)
    }
}

/// (name, selects_cluster) of each Praxis AI filter our configs use.
const AI_FILTERS: &[(&str, bool)] = &[
    ("intelligent_route", true),
    ("provider_route", true),
    ("credential_inject", false),
    ("openai_responses_format", false),
];

fn registry() -> Result<FilterRegistry, FilterError> {
    let mut registry = praxis::build_full_registry();
    for &(name, selects_cluster) in AI_FILTERS {
        let factory = move |_config: &serde_yaml::Value| -> Result<Box<dyn HttpFilter>, FilterError> {
            Ok(Box::new(AiStandIn { name, selects_cluster }))
        };
        registry.register(name, FilterFactory::Http(Arc::new(factory)))?;
    }
    Ok(registry)
}

/// praxis-proxy 0.5.3 src/commands.rs `validate_config_for_startup`, with the stand-ins added to the registry.
fn validate(path: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = praxis::load_config(Some(path))?;
    praxis_core::logging::validate_log_overrides(&config)?;
    let registry = registry()?;
    let health_registry = praxis_core::health::build_health_registry(&config.clusters);
    let kv_stores = praxis_core::kv::KvStoreRegistry::new();
    let ceiling = config.body_limits.max_response_bytes.unwrap_or(usize::MAX);
    let subrequest_client = praxis_core::subrequest::SubRequestClient::with_max_response_bytes(
        praxis_core::subrequest::SubRequestConnector::new(128, None),
        ceiling,
    );
    praxis::resolve_pipelines(&config, &registry, &health_registry, &kv_stores, &subrequest_client)?;
    Ok(())
}

const USAGE: &str = "usage: praxis-check FILE...";

fn main() -> ExitCode {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}\nRuns praxis-proxy 0.5.3's config loader and startup validation on each FILE;");
        println!("prints `accept FILE` or `reject FILE: ERROR`. Exit 0 when all are accepted, 1 otherwise.");
        return ExitCode::SUCCESS;
    }
    if files.is_empty() || files.iter().any(|a| a.starts_with('-')) {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let mut all_accepted = true;
    for file in &files {
        match validate(file) {
            Ok(()) => println!("accept {file}"),
            Err(error) => {
                all_accepted = false;
                // One line per file: Praxis's messages may quote YAML with newlines.
                println!("reject {file}: {}", error.to_string().replace('\n', " "));
            }
        }
    }
    if all_accepted { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
