//! Trajectory checks of a scenario: its `trajectory:` rules, tested against the assistant's
//! tool calls in the transcript. The rules and their evaluation are
//! [`assay_core::trajectory`] (the answer bank checks a product's reported calls with them
//! too), re-exported here; what is the simulator's own is the preflight's test that every tool
//! a rule names is offered ([`unknown_tools`]).

pub use assay_core::trajectory::*;

/// The preflight's test: every tool a scenario's trajectory names must be offered to the model
/// (under the name the model sees); one line per tool that is not, naming file and field.
pub fn unknown_tools(
    suite: &crate::suite::Suite,
    offered: &[crate::mcp::OfferedTool],
) -> Vec<String> {
    let names: Vec<&str> = offered.iter().map(|t| t.spec.name.as_str()).collect();
    let mut out = Vec::new();
    for scenario in &suite.scenarios {
        let Some(rules) = &scenario.config.trajectory else {
            continue;
        };
        let file = scenario
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        for (field, tool) in rules.tool_names() {
            if !names.contains(&tool) {
                out.push(format!(
                    "{file}: {field}: no server offers a tool `{tool}` (offered: {})",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ));
            }
        }
    }
    out
}
