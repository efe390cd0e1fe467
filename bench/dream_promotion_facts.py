"""The hand-labelled data of ``bench/dream_promotion.py``: the hand-written notes of the vault and the
100 promoted facts, each labelled with the note it should land in, or NEW.

A fictional company (Harbourline: offices in Lisbon and Porto, a SaaS product on Kubernetes). The
vault holds 33 *originals* (facts promoted or written on earlier nights) and 10 *decoys* (notes on the
same subjects as some new facts, holding a different fact). Of the 100 facts, 66 are new (most of them
share a subject and words with an original or a decoy, to tempt a wrong merge) and 34 are recurrences,
reworded by hand: 12 under the original's topic, 3 with the original's reason (so its name), 12 with no
topic and another reason, 4 with no topic and a reason that is an editing instruction, and 3 that recur
a new fact promoted earlier the same run. Labels were written by hand, fact by fact: a recurrence is
labelled with its original's note; a new fact is NEW even when it shares a subject with a note (the
prod database is not the staging database; desks are not parking spots).
"""

from __future__ import annotations

from dataclasses import dataclass

NEW = "new"

# kinds of facts
FRESH = "new"
SAME_TOPIC = "recurrence, same topic"
SAME_REASON = "recurrence, same reason"
REWORDED = "recurrence, no topic"
INSTRUCTION = "recurrence, no topic, instruction reason"
SAME_NIGHT = "recurrence of a fact of this run"


@dataclass(frozen=True)
class Fact:
    content: str
    label: str  # the note it should land in, or NEW
    kind: str
    topic: str = ""
    reason: str = ""


def _promoted(fact: str, n: int) -> str:
    return f"<!-- promoted: agent ada run 20260301T030000Z-{n:06x} -->\n{fact}\n"


def _written(title: str, fact: str) -> str:
    return f"# {title}\n\n{fact}\n"


# name -> (original text, its recurrence as (topic, reason, reworded content, kind)); None: not recurred
_ORIGINALS: list[tuple[str, str, tuple[str, str, str, str] | None]] = [
    # --- recurring under the same topic -------------------------------------------------------
    ("staging-db", "- The staging database runs PostgreSQL 15 on port 5433; backups go to the acme-backups bucket nightly.",
     ("staging-db", "staging db details", "- Staging Postgres (version 15) listens on 5433 and is backed up nightly to acme-backups.", SAME_TOPIC)),
    ("release-train", "- Releases ship every second Tuesday; the release captain freezes main at 10:00 on the Monday before.",
     ("release-train", "release cadence", "- Main is frozen at 10:00 the Monday before each fortnightly Tuesday release; the release captain owns the freeze.", SAME_TOPIC)),
    ("vpn-access", "- VPN access requests go through the #it-helpdesk channel and need a manager's approval.",
     ("vpn-access", "vpn", "- To get VPN access, ask in #it-helpdesk; a manager must approve the request.", SAME_TOPIC)),
    ("oncall-rotation", "- The on-call rotation hands over every Monday at 09:00 Berlin time via PagerDuty.",
     ("oncall-rotation", "on-call", "- PagerDuty hands the on-call pager to the next engineer on Mondays, 09:00 Berlin.", SAME_TOPIC)),
    ("ci-runners", "- CI runs on self-hosted runners in the build-eu cluster; jobs time out after 45 minutes.",
     ("ci-runners", "ci limits", "- Jobs on the self-hosted build-eu runners are killed after 45 minutes.", SAME_TOPIC)),
    ("expense-policy", "- Expenses under 50 EUR need no receipt; anything above needs a receipt uploaded to Pleo within 30 days.",
     ("expense-policy", "receipts", "- Pleo needs a receipt for any expense above 50 EUR, uploaded within 30 days.", SAME_TOPIC)),
    ("office-wifi", "- The Lisbon office Wi-Fi network is harbour-guest; the password rotates on the first of each month.",
     ("office-wifi", "wifi", "- harbour-guest is the Wi-Fi in the Lisbon office, and its password changes monthly on the 1st.", SAME_TOPIC)),
    ("api-rate-limits", "- The public API allows 600 requests per minute per key; bursts above that get HTTP 429.",
     ("api-rate-limits", "rate limits", "- Each API key gets 600 requests a minute on the public API, after which it receives 429 responses.", SAME_TOPIC)),
    ("design-review", "- Design reviews happen Thursdays at 15:00 in the Kestrel room; docs are due by Wednesday noon.",
     ("design-review", "reviews", "- Send design docs by Wednesday noon for the Thursday 15:00 review in the Kestrel room.", SAME_TOPIC)),
    ("log-retention", "- Application logs are kept 30 days in Loki; audit logs are kept one year in the cold bucket.",
     ("log-retention", "logs", "- Loki keeps application logs for 30 days, while audit logs stay a year in cold storage.", SAME_TOPIC)),
    ("laptop-refresh", "- Laptops are refreshed every three years; request a new one through the Snipe-IT portal.",
     ("laptop-refresh", "hardware", "- Request laptop replacements in Snipe-IT; the refresh cycle is three years.", SAME_TOPIC)),
    ("feature-flags", "- Feature flags live in Unleash; a flag older than 90 days must be removed or justified.",
     ("feature-flags", "flags", "- Unleash flags that are older than 90 days have to be cleaned up or justified.", SAME_TOPIC)),
    # --- recurring with the same reason (the original was named by it) ----------------------------
    ("payroll-dates", "- Salaries are paid on the 25th; if it falls on a weekend, the Friday before.",
     ("", "Payroll dates", "- Payday is the 25th, moved to the previous Friday when the 25th is a weekend.", SAME_REASON)),
    ("customer-escalations", "- Severity-1 customer escalations page the duty manager and need a status update every 30 minutes.",
     ("", "customer escalations", "- A sev-1 customer escalation pages the duty manager; status updates are due every 30 minutes.", SAME_REASON)),
    ("dns-provider", "- DNS for harbourline.io is managed in Cloudflare; changes need a ticket in the INFRA project.",
     ("", "DNS provider", "- harbourline.io DNS lives in Cloudflare, and every change needs an INFRA ticket.", SAME_REASON)),
    # --- recurring with no topic and another reason -------------------------------------------------
    ("kafka-cluster", "- The Kafka cluster has 5 brokers in eu-central-1; topic retention defaults to 7 days.",
     ("", "message broker setup", "- Topic retention on our 5-broker Kafka cluster in eu-central-1 defaults to 7 days.", REWORDED)),
    ("grafana-dashboards", "- Service dashboards live in Grafana under the Harbourline folder; each service owns one dashboard.",
     ("", "where to find dashboards", "- Every service owns one Grafana dashboard in the Harbourline folder.", REWORDED)),
    ("secrets-management", "- Secrets are stored in HashiCorp Vault under kv/harbourline; never commit them to Git.",
     ("", "secret handling", "- Never commit secrets to Git; keep them in HashiCorp Vault at kv/harbourline.", REWORDED)),
    ("terraform-state", "- Terraform state is kept in the tf-state S3 bucket with DynamoDB locking in eu-west-1.",
     ("", "infra state storage", "- Terraform uses the tf-state S3 bucket in eu-west-1, locked through DynamoDB.", REWORDED)),
    ("mobile-releases", "- iOS builds go to TestFlight first; the App Store submission waits two days of beta feedback.",
     ("", "app store process", "- After two days of TestFlight beta feedback, iOS builds are submitted to the App Store.", REWORDED)),
    ("support-hours", "- Customer support is staffed 08:00-20:00 CET on weekdays and 10:00-16:00 on Saturdays.",
     ("", "when support is available", "- Support works weekdays 08:00-20:00 CET and Saturdays 10:00-16:00.", REWORDED)),
    ("data-warehouse", "- The data warehouse is Snowflake; dbt models run every hour from the analytics repo.",
     ("", "analytics stack", "- Hourly dbt runs from the analytics repo build the Snowflake warehouse models.", REWORDED)),
    ("code-review", "- Every pull request needs two approvals; one must come from a code owner of the touched paths.",
     ("", "review rules", "- Pull requests need two approvals, including a code owner of the paths they touch.", REWORDED)),
    ("parking", "- Office parking spots in Lisbon are booked in the Deskbird app, at most two days a week.",
     ("", "car park booking", "- Book a Lisbon office parking spot in Deskbird; the limit is two days per week.", REWORDED)),
    ("backup-restore-test", "- Restore drills for the production database run quarterly; the last one took 48 minutes.",
     ("", "disaster recovery drills", "- Quarterly restore drills of the production database: the most recent drill took 48 minutes.", REWORDED)),
    ("incident-postmortems", "- Every sev-1 or sev-2 incident gets a blameless postmortem within five working days.",
     ("", "after incidents", "- Blameless postmortems are written within five working days of any sev-1 or sev-2 incident.", REWORDED)),
    ("search-service", "- The search service uses OpenSearch 2.11 with three data nodes; reindexing happens Sundays.",
     ("", "search backend", "- OpenSearch 2.11 backs the search service on three data nodes, with a Sunday reindex.", REWORDED)),
    # --- recurring with no topic and an editing instruction as the reason ------------------------------
    ("cdn-cache", "- The CDN caches static assets for 24 hours; purge with the cdn-purge job in Jenkins.",
     ("", "add to MEMORY.md under Infra", "- Static assets stay 24 hours in the CDN cache; the Jenkins cdn-purge job purges them.", INSTRUCTION)),
    ("holiday-calendar", "- Company holidays follow the Portuguese national calendar plus 24 and 31 December.",
     ("", "insert after the HR section", "- Besides Portuguese national holidays, 24 and 31 December are company holidays.", INSTRUCTION)),
    ("password-manager", "- Shared team passwords live in 1Password vaults named after each team.",
     ("", "update the line about passwords", "- Each team keeps its shared passwords in a 1Password vault named after the team.", INSTRUCTION)),
    ("staging-reset", "- The staging environment is reset from anonymised production data every Sunday night.",
     ("", "put this below the staging entry", "- Every Sunday night staging is rebuilt from anonymised production data.", INSTRUCTION)),
    # --- originals that do not recur (decoys for new facts) --------------------------------------------
    ("travel-booking", "- Business travel is booked through TravelPerk; flights over six hours may be premium economy.", None),
    ("onboarding-buddy", "- New hires get an onboarding buddy from their team for the first six weeks.", None),
]

_DECOYS: list[tuple[str, str]] = [
    ("redis-cluster", "- The production Redis cluster runs three shards with one replica each in eu-west-1."),
    ("sentry-projects", "- Sentry projects are named after the repository; the DSN is injected from Vault."),
    ("okta-groups", "- Okta groups map one to one to teams and grant access to AWS accounts."),
    ("lisbon-office", "- The Lisbon office is at Rua do Alecrim 12, third floor; reception opens at 08:30."),
    ("argo-cd", "- Argo CD syncs every application from the deploy repository; auto-sync is off in production."),
    ("k6-scripts", "- k6 load test scripts live in the perf repository next to the dashboards they feed."),
    ("notion-workspace", "- Product specs live in the Notion workspace under Product > Specs."),
    ("loki-queries", "- Useful Loki queries for the billing service are pinned in the Billing Grafana dashboard."),
    ("people-team", "- The people team answers HR questions in #ask-people within one working day."),
    ("checkly-setup", "- Checkly browser checks log in with the synthetic-monitor account every 10 minutes."),
]

# (topic, reason, content) of the new facts; the ones a later fact recurs are named in _SAME_NIGHT
_NEW: list[tuple[str, str, str]] = [
    ("prod-db", "", "- The production database runs PostgreSQL 14 on port 5432 with two streaming replicas."),
    ("", "redis cache", "- The Redis cache for sessions is flushed every Sunday at 03:00 by the cache-flush cron job."),
    ("kafka-consumers", "", "- Kafka consumer groups are named after the owning service, for example billing-events-consumer."),
    ("", "grafana alerts", "- Grafana alerts for production go to the #alerts-prod channel; staging alerts are muted at night."),
    ("vault-unseal", "", "- Vault unseal keys are split between three senior engineers; two are needed to unseal."),
    ("", "terraform modules", "- Shared Terraform modules live in the infra-modules repository and are versioned with git tags."),
    ("android-releases", "", "- Android builds are rolled out in stages on Google Play: 5%, 20%, then 100% after a day each."),
    ("", "support escalation tiers", "- Support has three tiers: tier 1 answers in the helpdesk, tier 2 reproduces, tier 3 is engineering."),
    ("dbt-tests", "", "- Every dbt model needs a not_null and unique test on its primary key before it is merged."),
    ("", "commit messages", "- Commit messages follow Conventional Commits; the type decides the changelog section."),
    ("bike-storage", "", "- Bikes can be stored in the basement of the Lisbon office; the code for the door is at reception."),
    ("", "chaos testing", "- Chaos experiments run in staging on Wednesdays with Litmus; production is never targeted."),
    ("visa-support", "", "- The people team sponsors work visas for hires from outside the EU; the process takes about three months."),
    ("", "status page", "- The public status page is status.harbourline.io on Atlassian Statuspage; incident commanders update it."),
    ("search-relevance", "", "- Search relevance is tuned with a judgement list of 500 queries rated by the support team."),
    ("", "mentoring program", "- Engineers can join the mentoring program twice a year; mentors meet their mentee every two weeks."),
    ("cdn-provider", "", "- The CDN provider is Fastly; its TLS certificates are renewed automatically by Let's Encrypt."),
    ("", "sick leave", "- Sick leave of more than three days needs a doctor's note sent to the people team."),
    ("ssh-keys", "", "- SSH keys must be ed25519 and are distributed to servers through the keys repository."),
    ("", "demo environment", "- The demo environment is rebuilt from fixtures every morning at 06:00 for sales demos."),
    ("api-versioning", "", "- Public API versions are date-based, like 2024-06-01; old versions are supported for 12 months."),
    ("", "meeting rooms", "- Meeting rooms in Lisbon are named after birds: Kestrel, Heron, Osprey and Puffin."),
    ("metrics-retention", "", "- Prometheus keeps metrics for 15 days locally; Thanos keeps downsampled metrics for two years."),
    ("", "monitor policy", "- Every employee can expense one external monitor up to 300 EUR."),
    ("flag-naming", "", "- Feature flag names use the pattern team.feature.variant, all lower case."),
    ("", "bonus payments", "- The yearly bonus is paid with the March salary."),
    ("enterprise-sla", "", "- Enterprise customers have a 99.95% uptime SLA with service credits above 30 minutes of downtime."),
    ("", "email provider", "- Company email runs on Google Workspace; aliases are requested from IT."),
    ("office-coffee", "", "- The coffee machine on the third floor is descaled every Friday by the office manager."),
    ("", "security training", "- Security awareness training is mandatory every year and takes about an hour in KnowBe4."),
    ("cost-dashboard", "", "- Cloud costs are reviewed monthly in the FinOps dashboard; each team has a budget owner."),
    ("", "load testing", "- Load tests use k6 against the perf environment and must reach 2,000 requests per second."),
    ("pgbouncer", "", "- PgBouncer runs in transaction mode in front of the production database with a pool of 200."),
    ("", "queue dead letters", "- Messages that fail five times land in a dead-letter topic named <topic>.dlq for manual replay."),
    ("uptime-checks", "", "- External uptime checks run every minute from three regions with Checkly."),
    ("", "git branching", "- Branch names start with the ticket key, like INFRA-123-short-description."),
    ("docker-images", "", "- Base Docker images are rebuilt weekly from distroless and scanned with Trivy before publishing."),
    ("", "ticket triage", "- New bug tickets are triaged every morning at 09:30 by the team's triage rotation."),
    ("gdpr-requests", "", "- GDPR deletion requests must be completed within 30 days and are tracked in the PRIVACY project."),
    ("", "team lunches", "- Team lunches are paid by the company once a month, up to 25 EUR per person."),
    ("kubernetes-upgrades", "", "- Kubernetes clusters are upgraded one minor version per quarter, staging two weeks before production."),
    ("", "architecture decisions", "- Architecture decisions are recorded as ADRs in the docs repository under decisions/."),
    ("translation-workflow", "", "- App translations are managed in Lokalise; translators get strings after the feature freeze."),
    ("", "hackathon", "- The company hackathon takes place every June in Lisbon and lasts two days."),
    ("pager-escalation", "", "- If the primary on-call does not acknowledge within 10 minutes, PagerDuty escalates to the secondary."),
    ("", "rollback procedure", "- To roll back a deploy, re-run the previous release pipeline in Argo CD; never edit the cluster by hand."),
    ("desk-booking", "", "- Desks in the Lisbon office are booked in Deskbird up to two weeks ahead."),
    ("", "invoice approval", "- Supplier invoices above 5,000 EUR need approval from the finance lead in Pleo."),
    ("wifi-office-porto", "", "- The Porto office Wi-Fi is harbour-porto and its password is on the kitchen whiteboard."),
    ("", "ci caching", "- CI caches dependencies per branch in the build-eu cluster's MinIO for seven days."),
    ("", "add to MEMORY.md under Tools", "- The internal package registry is Artifactory at artifacts.harbourline.io."),
    ("", "insert after the deploy section", "- Database migrations run as a separate Argo CD sync wave before the application pods."),
    ("", "append at the end of USER.md", "- The user prefers answers in British English."),
    ("", "update the line about the VPN", "- The VPN client is WireGuard, configured through the Tailscale admin console."),
    ("", "put into memory/office.md", "- The Lisbon office closes at 20:00; after that the door needs a badge."),
    ("", "move below the Release heading", "- Hotfixes are tagged hotfix/<date> and deployed by the on-duty SRE."),
    ("sso", "", "- Single sign-on uses Okta; new SaaS tools must support SAML before they are bought."),
    ("", "printer", "- The printer on the second floor is called Gull and needs the badge to release jobs."),
    ("error-tracking", "", "- Errors are tracked in Sentry; each alert rule belongs to the team that owns the service."),
    ("", "performance reviews", "- Performance reviews run twice a year, in April and October, with peer feedback first."),
    ("data-retention-customers", "", "- Customer data of closed accounts is deleted 90 days after the contract ends."),
    ("", "release notes", "- Release notes are written in Notion by the product manager and published on the changelog page."),
    ("api-keys-rotation", "", "- Customer API keys can be rotated in the dashboard; old keys keep working for 24 hours."),
    ("", "staging access", "- Staging is reachable only through the VPN; its hostnames end in .stg.harbourline.io."),
    ("observability-budget", "", "- Each team may send at most 50 GB of logs per day to Loki before sampling kicks in."),
    ("", "parental leave", "- Parental leave is 20 weeks fully paid for every parent."),
]

# recurrences of new facts of this run: (label = the note the new fact must have created, topic, reason, content)
_SAME_NIGHT: list[tuple[str, str, str, str]] = [
    ("redis-cache", "", "session cache flush", "- Every Sunday at 03:00 the cache-flush cron job empties the Redis session cache."),
    ("office-coffee", "office-coffee", "coffee", "- The office manager descales the third-floor coffee machine on Fridays."),
    ("hackathon", "", "summer hackathon", "- Every June the Lisbon hackathon runs for two days."),
]


def vault_notes() -> dict[str, str]:
    """The hand-written notes of the vault: name -> content (promoted-looking and written-looking, alternately)."""
    out: dict[str, str] = {}
    for n, (name, text, _) in enumerate(_ORIGINALS):
        out[name] = _promoted(text, n) if n % 2 == 0 else _written(name.replace("-", " ").capitalize(), text)
    for n, (name, text) in enumerate(_DECOYS):
        out[name] = _written(name.replace("-", " ").capitalize(), text) if n % 2 == 0 else _promoted(text, 100 + n)
    return out


def facts() -> list[Fact]:
    """The 100 facts in promotion order: the new facts and the recurrences of originals interleaved
    (a fixed order: every third fact is a recurrence), the recurrences of this run's facts last."""
    recurring = [Fact(content, name, kind, topic, reason) for name, _, again in _ORIGINALS if again
                 for topic, reason, content, kind in [again]]
    fresh = [Fact(content, NEW, FRESH, topic, reason) for topic, reason, content in _NEW]
    ordered: list[Fact] = []
    while fresh or recurring:
        ordered += fresh[:2]
        del fresh[:2]
        ordered += recurring[:1]
        del recurring[:1]
    ordered += [Fact(content, label, SAME_NIGHT, topic, reason) for label, topic, reason, content in _SAME_NIGHT]
    return ordered
