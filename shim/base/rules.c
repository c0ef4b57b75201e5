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
    /* the severities are option strict_severity's choices, in order */
    const char *name = us_config_choice_name(US_OPTION_ID_strict_severity, (int)severity);
    return name != NULL ? name : "unknown";
}
