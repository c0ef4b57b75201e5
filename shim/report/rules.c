/* rules.c - the table of rules, from rules.def (see rules.h). */
#include "rules.h"

#include <string.h>

/* Indexed by enum us_rule_id: both come from the same rows, in order. */
const struct us_rule_info us_rules[US_RULE_COUNT] = {
#define US_RULE(id, severity, what, why, fix) [US_RULE_##id] = { #id, US_SEVERITY_##severity, what, why, fix },
#include "rules.def"
#undef US_RULE
};

int us_rule_find(const char *id)
{
    if (id == NULL)
        return -1;
    for (int i = 0; i < US_RULE_COUNT; i++)
        if (strcmp(us_rules[i].id, id) == 0)
            return i;
    return -1;
}

const char *us_severity_name(enum us_severity severity)
{
    switch (severity) {
    case US_SEVERITY_LOW: return "low";
    case US_SEVERITY_MEDIUM: return "medium";
    case US_SEVERITY_HIGH: return "high";
    }
    return "unknown";
}
