//! Small edits to the JSON Schemas derived from file types (`assay schema`), where a derive
//! cannot say all that the reader checks.

/// Makes the property `field` of `schema`'s root object the constant `value` (a labels file's
/// `judge: simulation`), in place of its derived type.
pub fn set_const(schema: &mut schemars::Schema, field: &str, value: &str) {
    if let Some(property) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(field))
        .and_then(serde_json::Value::as_object_mut)
    {
        property.remove("type");
        property.insert("const".to_owned(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_becomes_a_constant() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Labels {
            judge: String,
        }
        let mut schema = schemars::schema_for!(Labels);
        set_const(&mut schema, "judge", "rubric");
        assert_eq!(
            schema.get("properties").unwrap()["judge"],
            serde_json::json!({"const": "rubric"})
        );
    }
}
