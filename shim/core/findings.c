/* findings.c - PLACEHOLDER until the findings module lands: records nothing. */
#include "findings.h"

#include "config.h"

bool us_findings_wanted(void) { return us_config()->mode != US_MODE_OFF; }
void us_site_capture(struct us_site *site) { site->depth = 0; }
bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api)
{
    (void)rule; (void)site; (void)api;
    return false;
}
void us_findings_record(const struct us_finding *f, const struct us_site *site) { (void)f; (void)site; }
void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes)
{
    (void)name; (void)device; (void)start_ns; (void)end_ns; (void)bytes;
}
void us_findings_report(void) {}
