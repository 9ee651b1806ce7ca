//! The MCP server: seven tools and one resource over the quest [`Store`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::store::{Store, StoreError};

pub const QUEST_STATE_URI: &str = "scout://quest-state";

const INSTRUCTIONS: &str = "\
Tracks one scout's quest: a savings goal, daily chores, a weekly budget, merit-badge \
requirements and emails to adults. Read the state with get_quest_state (or the \
scout://quest-state resource) before answering questions about progress, and record every \
change the scout reports with the matching tool. A tool that refuses a change explains why \
and what would be accepted: fix the call or ask the scout, never pretend it was recorded. \
Emails are only recorded, never sent, and must copy the scout's parent.";

/// Test hooks read from the environment at start-up.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Hooks {
    /// `SCOUT_QUEST_MCP_CRASH_AFTER=N`: exit(1) when the (N+1)-th tool call arrives.
    pub crash_after: Option<u64>,
    /// `SCOUT_QUEST_MCP_SLOW=tool:millis`: sleep before answering that tool.
    pub slow: Option<(String, Duration)>,
}

impl Hooks {
    pub fn from_env() -> Result<Hooks, String> {
        Hooks::parse(
            std::env::var("SCOUT_QUEST_MCP_CRASH_AFTER").ok().as_deref(),
            std::env::var("SCOUT_QUEST_MCP_SLOW").ok().as_deref(),
        )
    }

    fn parse(crash_after: Option<&str>, slow: Option<&str>) -> Result<Hooks, String> {
        let crash_after = crash_after
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    format!("SCOUT_QUEST_MCP_CRASH_AFTER must be a whole number, got `{v}`")
                })
            })
            .transpose()?;
        let slow = slow
            .map(|v| {
                let bad =
                    || format!("SCOUT_QUEST_MCP_SLOW must look like tool_name:millis, got `{v}`");
                let (tool, ms) = v.split_once(':').ok_or_else(bad)?;
                let ms: u64 = ms.trim().parse().map_err(|_| bad())?;
                if tool.trim().is_empty() {
                    return Err(bad());
                }
                Ok((tool.trim().to_owned(), Duration::from_millis(ms)))
            })
            .transpose()?;
        Ok(Hooks { crash_after, slow })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetRequirementsArgs {
    /// Only this badge: `personal_management` or `family_life`.
    pub badge: Option<String>,
    /// Only this status: not_started, in_progress, ready_for_review, submitted or approved.
    pub status: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LogChoreArgs {
    /// The chore's id or its name (any case), as listed in get_quest_state.
    pub chore: String,
    /// The day it was done, YYYY-MM-DD; defaults to today. At most 7 days back.
    pub date: Option<String>,
    pub notes: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LogBudgetEntryArgs {
    /// Budget week number, 1 or more; each week is logged once.
    pub week: i64,
    /// Money that came in that week, in dollars (0 or more).
    pub income: f64,
    /// Money spent that week, in dollars (0 or more).
    pub expenses: f64,
    pub notes: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AdvanceRequirementArgs {
    /// A requirement id such as `pm_1` or `fl_6`.
    pub requirement_id: String,
    /// The next status. Allowed moves: not_started -> in_progress -> ready_for_review ->
    /// submitted -> approved, and in_progress -> not_started.
    pub new_status: String,
    /// What the scout did that justifies the move.
    pub evidence: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ComposeEmailArgs {
    /// Bare addresses (name@example.com).
    pub to: Vec<String>,
    /// Bare addresses. The scout's parent must be here (or in `to`).
    #[serde(default)]
    pub cc: Vec<String>,
    pub subject: String,
    pub body: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateQuestGoalArgs {
    /// The new thing the scout is saving for.
    pub goal: String,
    /// Its cost in dollars, above 0.
    pub target_budget: f64,
    /// Why the goal changed.
    pub reason: Option<String>,
}

#[derive(Clone)]
pub struct ScoutServer {
    store: Arc<Mutex<Store>>,
    hooks: Arc<Hooks>,
    calls: Arc<AtomicU64>,
    tool_router: ToolRouter<ScoutServer>,
}

impl ScoutServer {
    pub fn new(store: Store, hooks: Hooks) -> ScoutServer {
        ScoutServer {
            store: Arc::new(Mutex::new(store)),
            hooks: Arc::new(hooks),
            calls: Arc::new(AtomicU64::new(0)),
            tool_router: Self::tool_router(),
        }
    }

    fn with_store(
        &self,
        f: impl FnOnce(&mut Store) -> Result<Value, StoreError>,
    ) -> Result<Value, StoreError> {
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut store)
    }

    /// One text block of JSON; a broken rule becomes an error result the model can read.
    fn answer(&self, f: impl FnOnce(&mut Store) -> Result<Value, StoreError>) -> CallToolResult {
        match self.with_store(f) {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(to_json(&value))]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        }
    }
}

/// Pretty JSON, the same text for the tool, the resource and `dump`.
pub fn to_json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned())
}

#[tool_router]
impl ScoutServer {
    #[tool(
        description = "The scout's whole quest: profile, goal and savings, chores and today's chore log, budget entries, requirement statuses, recorded emails, coach character settings and contacts (parent, counselors)."
    )]
    fn get_quest_state(&self) -> CallToolResult {
        self.answer(|s| s.quest_state())
    }

    #[tool(
        description = "Merit-badge requirements with their full descriptions, optionally filtered by badge and status."
    )]
    fn get_requirements(&self, Parameters(a): Parameters<GetRequirementsArgs>) -> CallToolResult {
        self.answer(|s| s.requirements(a.badge.as_deref(), a.status.as_deref()))
    }

    #[tool(description = "Record that the scout did one of their chores (once per chore per day).")]
    fn log_chore(&self, Parameters(a): Parameters<LogChoreArgs>) -> CallToolResult {
        self.answer(|s| s.log_chore(&a.chore, a.date.as_deref(), a.notes.as_deref()))
    }

    #[tool(
        description = "Record one week of the scout's budget. Savings (income - expenses) are added to savings_to_date. Each week number once."
    )]
    fn log_budget_entry(&self, Parameters(a): Parameters<LogBudgetEntryArgs>) -> CallToolResult {
        self.answer(|s| s.log_budget_entry(a.week, a.income, a.expenses, a.notes.as_deref()))
    }

    #[tool(description = "Move a requirement to its next status, with the evidence for the move.")]
    fn advance_requirement(
        &self,
        Parameters(a): Parameters<AdvanceRequirementArgs>,
    ) -> CallToolResult {
        self.answer(|s| {
            s.advance_requirement(&a.requirement_id, &a.new_status, a.evidence.as_deref())
        })
    }

    #[tool(
        description = "Record an email the scout wants to send to an adult (it is not sent). Youth protection: the scout's parent must be copied."
    )]
    fn compose_email(&self, Parameters(a): Parameters<ComposeEmailArgs>) -> CallToolResult {
        self.answer(|s| s.compose_email(&a.to, &a.cc, &a.subject, &a.body))
    }

    #[tool(
        description = "Change what the scout is saving for and its target budget; the old goal is kept in goal_history."
    )]
    fn update_quest_goal(&self, Parameters(a): Parameters<UpdateQuestGoalArgs>) -> CallToolResult {
        self.answer(|s| s.update_quest_goal(&a.goal, a.target_budget, a.reason.as_deref()))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ScoutServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            "scout-quest-mcp",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let seen = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hooks.crash_after.is_some_and(|n| seen >= n) {
            eprintln!(
                "scout-quest-mcp: SCOUT_QUEST_MCP_CRASH_AFTER reached at tool call {}; exiting",
                seen + 1
            );
            std::process::exit(1);
        }
        if let Some((tool, delay)) = &self.hooks.slow
            && request.name == tool.as_str()
        {
            tokio::time::sleep(*delay).await;
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resource = Resource::new(QUEST_STATE_URI, "quest-state")
            .with_title("Quest state")
            .with_description("The same JSON as the get_quest_state tool")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != QUEST_STATE_URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "unknown resource `{}`; this server has {QUEST_STATE_URI}",
                    request.uri
                ),
                None,
            ));
        }
        let state = self
            .with_store(|s| s.quest_state())
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let contents = ResourceContents::text(to_json(&state), QUEST_STATE_URI)
            .with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_parse_and_reject_bad_values() {
        assert_eq!(Hooks::parse(None, None).unwrap(), Hooks::default());
        let h = Hooks::parse(Some("2"), Some("log_chore:150")).unwrap();
        assert_eq!(h.crash_after, Some(2));
        assert_eq!(
            h.slow,
            Some(("log_chore".to_owned(), Duration::from_millis(150)))
        );
        assert!(
            Hooks::parse(Some("two"), None)
                .unwrap_err()
                .contains("CRASH_AFTER")
        );
        assert!(
            Hooks::parse(None, Some("log_chore"))
                .unwrap_err()
                .contains("tool_name:millis")
        );
        assert!(Hooks::parse(None, Some(":5")).is_err());
    }

    #[test]
    fn tools_are_listed_with_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(
            &dir.path().join("q.db"),
            &crate::store::tests::fixture(),
            crate::store::tests::today(),
        )
        .unwrap();
        let server = ScoutServer::new(store, Hooks::default());
        let tools = server.tool_router.list_all();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "advance_requirement",
                "compose_email",
                "get_quest_state",
                "get_requirements",
                "log_budget_entry",
                "log_chore",
                "update_quest_goal"
            ]
        );
        let email = tools.iter().find(|t| t.name == "compose_email").unwrap();
        let required = email.input_schema["required"].as_array().unwrap();
        assert!(required.contains(&"to".into()) && !required.contains(&"cc".into()));
    }
}
