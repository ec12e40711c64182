// The name rule of namespaces (and subscriptions), built from the engine's own statement of it:
// nameRule.json is a copy of storage_engine.rules.validation.name_rule_facts(), checked equal by
// tests/storage_engine/test_name_rule.py. The hint and the check below come from it, never by hand.

import rule from "./nameRule.json";

export const NAME_MAX_LENGTH = rule.max_length;

/** The characters and length the engine allows (the reserved names are checked apart). */
export const NAME_RE = new RegExp(`^[${rule.chars}]{1,${rule.max_length}}$`);

/** The rule in the engine's words: "1-200 characters of ASCII letters, …, other than '.' and '..'". */
export const NAME_RULE = rule.rule.replace(/^must be /, "");

/** What the create form shows under the name: the whole rule and names it accepts. */
export const NAME_HINT = `${NAME_RULE[0]!.toUpperCase()}${NAME_RULE.slice(1)}; e.g. ${rule.examples.join(", ")}.`;

export const NAME_EXAMPLES: readonly string[] = rule.examples;

/** Why `name` is not a valid name (the rule's words), or null when the engine will take it. */
export function nameProblem(name: string): string | null {
  if (!name) return "Enter a name.";
  if (!NAME_RE.test(name) || rule.reserved.includes(name)) return `The name ${rule.rule}.`;
  return null;
}
