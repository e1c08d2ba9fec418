/* Readable rendering of a plan (`a3s-sandbox plan --explain`). */
#ifndef A3S_EXPLAIN_H
#define A3S_EXPLAIN_H

/* Render the JSON text of a3s_sandbox_plan_json as readable text, every rule with its
 * provenance. malloc'd; NULL on malformed JSON or ENOMEM. */
char *a3s_plan_explain(const char *plan_json);

#endif
