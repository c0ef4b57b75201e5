/* test_rules.c - the rules table (rules.def): complete, unique, findable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "summary.h"

#include "rules.h"

static void test_rules_fields_are_filled(void **state)
{
    (void)state;
    for (int i = 0; i < US_RULE_COUNT; i++) {
        const struct us_rule_info *r = &us_rules[i];
        assert_non_null(r->id);
        assert_true(strlen(r->id) > 0);
        assert_true(strlen(r->what) > 0);
        assert_true(strlen(r->why) > 0);
        assert_true(strlen(r->fix) > 0);
        assert_in_range(r->severity, US_SEVERITY_LOW, US_SEVERITY_HIGH);
        /* ids go into allow-lists and file names: lower case, digits, '_' */
        for (const char *c = r->id; *c != '\0'; c++)
            assert_true((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
    }
}

static void test_rules_ids_are_unique(void **state)
{
    (void)state;
    for (int i = 0; i < US_RULE_COUNT; i++)
        for (int j = i + 1; j < US_RULE_COUNT; j++)
            assert_string_not_equal(us_rules[i].id, us_rules[j].id);
}

/* The enum and the table come from the same rows: each entry sits at its id. */
static void test_rules_enum_indexes_table(void **state)
{
    (void)state;
    assert_true(US_RULE_COUNT > 0);
    assert_string_equal(us_rules[US_RULE_pageable_h2d].id, "pageable_h2d");
    assert_string_equal(us_rules[US_RULE_staged_peer].id, "staged_peer");
    assert_int_equal(us_rules[US_RULE_pageable_d2h].severity, US_SEVERITY_HIGH);
    assert_int_equal(us_rules[US_RULE_sync_memset].severity, US_SEVERITY_LOW);
    assert_string_equal(us_rules[US_RULE_COUNT - 1].id, "explicit_sync");
}

static void test_rules_find(void **state)
{
    (void)state;
    for (int i = 0; i < US_RULE_COUNT; i++)
        assert_int_equal(us_rule_find(us_rules[i].id), i);
    assert_int_equal(us_rule_find("staged_peer"), US_RULE_staged_peer);
    assert_int_equal(us_rule_find("no_such_rule"), -1);
    assert_int_equal(us_rule_find("staged_pee"), -1);   /* no prefix match */
    assert_int_equal(us_rule_find("STAGED_PEER"), -1);  /* ids are exact */
    assert_int_equal(us_rule_find(""), -1);
    assert_int_equal(us_rule_find(NULL), -1);
}

static void test_rules_severity_names(void **state)
{
    (void)state;
    assert_string_equal(us_severity_name(US_SEVERITY_LOW), "low");
    assert_string_equal(us_severity_name(US_SEVERITY_MEDIUM), "medium");
    assert_string_equal(us_severity_name(US_SEVERITY_HIGH), "high");
    assert_string_equal(us_severity_name((enum us_severity)42), "unknown");
}

/* The names are the choices of option strict_severity, in the same order. */
static void test_rules_severity_names_match_option(void **state)
{
    (void)state;
    const char *choices = NULL;
    for (size_t i = 0; i < us_option_count; i++)
        if (strcmp(us_options[i].name, "strict_severity") == 0)
            choices = us_options[i].range;
    assert_non_null(choices);
    for (int s = US_SEVERITY_LOW; s <= US_SEVERITY_HIGH; s++) {
        int parsed = -1;
        assert_true(us_parse_enum(us_severity_name((enum us_severity)s), choices, &parsed));
        assert_int_equal(parsed, s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_fields_are_filled),
        cmocka_unit_test(test_rules_ids_are_unique),
        cmocka_unit_test(test_rules_enum_indexes_table),
        cmocka_unit_test(test_rules_find),
        cmocka_unit_test(test_rules_severity_names),
        cmocka_unit_test(test_rules_severity_names_match_option),
    };
    return US_RUN_TESTS("test_rules", tests, NULL, NULL);
}
