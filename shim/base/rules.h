/* rules.h - the table of rules (rules.def), for the log, the report,
 * strict mode and the docs. */
#ifndef UNSTALL_RULES_H
#define UNSTALL_RULES_H

#include "config.h"

enum us_rule_id {
#define US_RULE(id, severity, what, why, fix) US_RULE_##id,
#include "rules.def"
#undef US_RULE
    US_RULE_COUNT
};

struct us_rule_info {
    const char *id;
    enum us_severity severity;
    const char *what;
    const char *why;
    const char *fix;
};

extern const struct us_rule_info us_rules[US_RULE_COUNT];

/* -1 if no rule has that id */
int us_rule_find(const char *id);
const char *us_severity_name(enum us_severity severity);

#endif
