//! Reading a whole Unleash instance: its version first (4.0–7.x; others refused), then for
//! 6.x–7.x the route set of MODERN-MODEL §6 (one features-batch export per environment plus
//! the registries), for 4.x–5.x the state export plus what it lacks. Unleash's revision
//! (`revision`) is read before and after: an instance that changed meanwhile is an error.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::progress::Progress;
use super::revision::revision;
use super::unleash_api::{MigrationError, UnleashApi};

/// An Unleash version, as `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Version {
    /// Parses `7.5.1`, `5.12.8+abc` or `v4.22.0`.
    pub fn parse(text: &str) -> Option<Self> {
        let core = text.trim().trim_start_matches('v');
        let core = core.split(['+', '-', ' ']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Self(major, minor, patch))
    }
}

/// What was read from Unleash, route by route, as it answered.
#[derive(Debug, Default)]
pub struct UnleashInstance {
    pub version: Option<Version>,
    pub environments: Vec<Value>,
    pub projects: Vec<Value>,
    pub context_fields: Vec<Value>,
    pub strategies: Vec<Value>,
    pub tag_types: Vec<Value>,
    pub tags: Vec<Value>,
    pub segments: Vec<Value>,
    pub tokens: Vec<Value>,
    pub addons: Vec<Value>,
    /// One features-batch export per environment (6.x–7.x), by environment name.
    pub exports: Vec<(String, Value)>,
    /// The state export (4.x–5.x).
    pub state_export: Option<Value>,
    /// Toggle variants per `(toggle, environment)` as each environment's client document
    /// serves them: read when the state export has them on the toggle only (4.x).
    pub environment_variants: BTreeMap<(String, String), Value>,
    /// Dependencies per child (4.x–5.x: read toggle by toggle), as `{feature, dependencies}`.
    pub dependencies: Vec<Value>,
    pub archived: Vec<Value>,
    /// How long reading took.
    pub read_time: Duration,
}

/// Reads the version Unleash reports, refusing one outside 4.0–7.x.
pub async fn read_version(api: &UnleashApi) -> Result<Version, MigrationError> {
    let config = api.get("/api/admin/ui-config").await?;
    let text = config["versionInfo"]["current"]["oss"]
        .as_str()
        .filter(|v| !v.is_empty())
        .or_else(|| config["version"].as_str())
        .unwrap_or_default();
    let version = Version::parse(text).ok_or_else(|| {
        MigrationError::Unsupported(format!(
            "Unleash did not say its version (/api/admin/ui-config answered \"{text}\")"
        ))
    })?;
    if !(4..=7).contains(&version.0) {
        return Err(MigrationError::Unsupported(format!(
            "Unleash {version} is not supported: this command moves Unleash 4.0 to 7.x \
             (8.x may store token secrets only hashed; an older one, upgrade it to 4.x first)"
        )));
    }
    Ok(version)
}

/// `field` of `value` as a list (none when absent).
fn list(value: &Value, field: &str) -> Vec<Value> {
    value[field].as_array().cloned().unwrap_or_default()
}

/// Reads the whole instance.
pub async fn read_instance(
    api: &UnleashApi,
    progress: &Progress,
) -> Result<UnleashInstance, MigrationError> {
    let started = Instant::now();
    let version = read_version(api).await?;
    let before = revision(api, version).await?;
    let mut instance = UnleashInstance {
        version: Some(version),
        ..Default::default()
    };
    if version.0 >= 6 {
        read_route_set(api, version, progress, &mut instance).await?;
    } else {
        read_state_export(api, version, progress, &mut instance).await?;
    }
    instance.context_fields = api
        .get("/api/admin/context")
        .await?
        .as_array()
        .cloned()
        .unwrap_or_default();
    progress.count("context fields", instance.context_fields.len());
    instance.tokens = list(&api.get("/api/admin/api-tokens").await?, "tokens");
    progress.count("API tokens", instance.tokens.len());
    instance.addons = list(&api.get("/api/admin/addons").await?, "addons");
    progress.count("addons", instance.addons.len());
    instance.tags = list(&api.get("/api/admin/tags").await?, "tags");
    let after = revision(api, version).await?;
    if before != after {
        return Err(MigrationError::ChangedDuringRead { before, after });
    }
    instance.read_time = started.elapsed();
    Ok(instance)
}

/// 6.x–7.x: the registries and one features-batch export per environment.
async fn read_route_set(
    api: &UnleashApi,
    version: Version,
    progress: &Progress,
    instance: &mut UnleashInstance,
) -> Result<(), MigrationError> {
    instance.environments = list(&api.get("/api/admin/environments").await?, "environments");
    progress.count("environments", instance.environments.len());
    instance.projects = list(&api.get("/api/admin/projects").await?, "projects");
    instance.strategies = list(&api.get("/api/admin/strategies").await?, "strategies");
    instance.tag_types = list(&api.get("/api/admin/tag-types").await?, "tagTypes");
    instance.segments = list(&api.get("/api/admin/segments").await?, "segments");
    progress.count("segments", instance.segments.len());
    let names: Vec<String> = instance
        .environments
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    let mut toggles = 0;
    for environment in names {
        let export = api
            .post(
                "/api/admin/features-batch/export",
                &json!({"environment": environment, "features": []}),
            )
            .await?;
        toggles += export["featureEnvironments"].as_array().map_or(0, Vec::len);
        progress.count("toggle environments", toggles);
        instance.exports.push((environment, export));
    }
    instance.archived = read_archived(api, version, progress).await?;
    Ok(())
}

/// Archived toggles: the feature search (6.4+), else the archive listing (up to 6.10).
async fn read_archived(
    api: &UnleashApi,
    version: Version,
    progress: &Progress,
) -> Result<Vec<Value>, MigrationError> {
    if version < Version(6, 4, 0) {
        let archive = api.get("/api/admin/archive/features").await?;
        return Ok(list(&archive, "features"));
    }
    let mut archived = Vec::new();
    loop {
        let page = api
            .get(&format!(
                "/api/admin/search/features?archived=IS:true&limit=100&offset={}",
                archived.len()
            ))
            .await?;
        let items = list(&page, "features");
        let total = page["total"].as_u64().unwrap_or(0) as usize;
        let empty = items.is_empty();
        archived.extend(items);
        progress.count("archived toggles", archived.len());
        if empty || archived.len() >= total {
            return Ok(archived);
        }
    }
}

/// 4.x–5.x: the state export (every environment, segments with constraints), the
/// environments, archived toggles and dependencies (5.5+) it lacks.
async fn read_state_export(
    api: &UnleashApi,
    version: Version,
    progress: &Progress,
    instance: &mut UnleashInstance,
) -> Result<(), MigrationError> {
    let state = api.get("/api/admin/state/export?format=json").await?;
    instance.environments = list(&api.get("/api/admin/environments").await?, "environments");
    progress.count("environments", instance.environments.len());
    instance.projects = list(&state, "projects");
    instance.strategies = list(&state, "strategies");
    instance.tag_types = list(&state, "tagTypes");
    instance.segments = list(&state, "segments");
    progress.count("segments", instance.segments.len());
    let features = list(&state, "features");
    progress.count("toggles", features.len());
    instance.environment_variants = read_environment_variants(api, &state, instance).await?;
    if version >= Version(5, 5, 0) {
        for feature in features.iter().filter(|f| f["archived"] != json!(true)) {
            let (Some(name), Some(project)) =
                (feature["name"].as_str(), feature["project"].as_str())
            else {
                continue;
            };
            let detail = api
                .get(&format!("/api/admin/projects/{project}/features/{name}"))
                .await?;
            let dependencies = list(&detail, "dependencies");
            if !dependencies.is_empty() {
                instance
                    .dependencies
                    .push(json!({"feature": name, "dependencies": dependencies}));
            }
        }
    }
    // The state export leaves archived toggles out (5.x) or marks them (older 4.x): the
    // archive listing has them all.
    let archive = api.get("/api/admin/archive/features").await?;
    instance.archived = list(&archive, "features");
    for feature in features.iter().filter(|f| f["archived"] == json!(true)) {
        if !instance
            .archived
            .iter()
            .any(|a| a["name"] == feature["name"])
        {
            instance.archived.push(feature.clone());
        }
    }
    progress.count("archived toggles", instance.archived.len());
    instance.state_export = Some(state);
    Ok(())
}

/// 4.x keeps toggle variants per environment, but its state export (without the
/// `variantsPerEnvironment` flag) shows one environment's on the toggle and none on its
/// environments: each environment's client document has them as SDKs see them. Nothing is
/// read when the export has them per environment (5.x).
async fn read_environment_variants(
    api: &UnleashApi,
    state: &Value,
    instance: &UnleashInstance,
) -> Result<BTreeMap<(String, String), Value>, MigrationError> {
    let mut variants = BTreeMap::new();
    let per_environment = list(state, "featureEnvironments")
        .iter()
        .all(|fe| fe["variants"].is_array());
    if per_environment {
        return Ok(variants);
    }
    for environment in instance
        .environments
        .iter()
        .filter_map(|e| e["name"].as_str())
    {
        let encoded: String =
            url::form_urlencoded::byte_serialize(environment.as_bytes()).collect();
        let document = api
            .get(&format!("/api/client/features?environment={encoded}"))
            .await?;
        for feature in list(&document, "features") {
            if let Some(name) = feature["name"].as_str() {
                let served = feature.get("variants").cloned().unwrap_or(json!([]));
                variants.insert((name.to_string(), environment.to_string()), served);
            }
        }
    }
    Ok(variants)
}
