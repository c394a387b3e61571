"""The OpenAPI 3.0 document of the HTTP API, served at ``GET /api/v1/openapi.json``.

Written out by hand (not derived from the routes or the access table), so that the test comparing it with
``app.url_map`` and :data:`deniable.aggregator.api.auth.ROUTE_ACCESS` can catch either side drifting.
Every operation declares its security: ``bearerAuth`` or ``[]`` (public).
"""

from __future__ import annotations

import copy
from typing import Any

from deniable.shared.contract import MAX_BATCH
from deniable.shared.descriptor import ADJACENCIES, CENTRAL_MECHANISM, TRUST_MODELS
from deniable.shared.limits import (
    BASE64URL_PATTERN,
    CAMPAIGN_EPSILON,
    CAMPAIGN_PAGE_DEFAULT,
    CAMPAIGN_PAGE_MAX,
    CAMPAIGN_STATUSES,
    CENTRAL_DELTA_RANGE,
    KEY_PATTERN,
    MAX_ACCOUNT_CHARS,
    MAX_BUDGET,
    MAX_CATEGORIES,
    MAX_CATEGORY_CHARS,
    MAX_GROUP_FIELDS,
    MAX_GROUP_SIZE,
    MAX_GROUP_VALUE_CHARS,
    MAX_GROUP_VALUES,
    MAX_MIN_REPORTS_BEFORE_RELEASE,
    MAX_QUERY_CHARS,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONS,
    MAX_REFRESH_INTERVAL_SECONDS,
    MAX_RHO,
    MAX_ROUND_CHARS,
    MAX_TOKEN_REQUESTS,
    MAX_TOKENS_PER_ACCOUNT,
    MAX_TOP,
    MIN_CATEGORIES,
    NUMBER_STEPS,
    PSEUDONYM_PATTERN,
    QUESTION_SHARE,
    RELEASES_PAGE_MAX,
    REPORT_ID_PATTERN,
    ROUND_PATTERN,
    SHUFFLE_MIN_BATCH_RANGE,
    SHUFFLER_URL_MAX_CHARS,
    SIGNATURE_PATTERN,
    SLUG_MAX_CHARS,
    SLUG_PATTERN,
    TIMELINE_BUCKETS,
    TIMELINE_MAX_BUCKETS,
)
from deniable.shared.mechanisms import mechanism_names
from deniable.shared.mechanisms.estimate import INTERVAL_METHODS
from deniable.shared.mechanisms.registry import KINDS
from deniable.shared.survey import SPLIT_MODES, SPLIT_REQUESTS
from deniable.shared.tokens import TOKEN_TYPE

__all__ = ["document"]

_SLUG = {"type": "string", "pattern": SLUG_PATTERN, "minLength": 1, "maxLength": SLUG_MAX_CHARS}
#: The mechanism enums, filled from the registry by :func:`document` (these are the built-in ones).
def _in_descriptor() -> list[str]:
    """A descriptor's ``mechanism``: every registered one-choice mechanism, or the central one."""
    return [*mechanism_names("choice"), CENTRAL_MECHANISM]


def _of_questions() -> list[str]:
    """A survey question's ``mechanism``: every registered mechanism of every kind, or the central one."""
    return [*(name for kind in KINDS for name in mechanism_names(kind)), CENTRAL_MECHANISM]


_MECHANISMS_IN_DESCRIPTOR = _in_descriptor()
_MECHANISMS_AT_CREATE = ["auto", *_MECHANISMS_IN_DESCRIPTOR]
_MECHANISMS_OF_QUESTIONS = _of_questions()
#: Said next to the unbiased counts of a local estimate (``Estimate.to_dict``).
_UNBIASED = {
    "type": "object",
    "description": "the counts and proportions are unbiased and may fall outside [0, n] and [0, 1] at small n "
    "(outside_range: whether one does here); consistent_count is the biased variant inside them",
    "properties": {"outside_range": {"type": "boolean"}, "note": {"type": "string"}},
}
_NUM_OR_NULL = {"type": "number", "nullable": True}
_INTERVAL = {"type": "array", "items": _NUM_OR_NULL, "minItems": 2, "maxItems": 2}
#: The figures of one category (or option) of an estimate: the count and the proportion, each with its
#: standard error and interval (a local estimate's and a survey question's rows alike).
_ROW_FIGURES = {
    "count": _NUM_OR_NULL,
    "stderr": _NUM_OR_NULL,
    "ci": _INTERVAL,
    "proportion": _NUM_OR_NULL,
    "proportion_stderr": _NUM_OR_NULL,
    "proportion_ci": _INTERVAL,
}
_GROUP_VALUES_DOC = (
    "the declared (public) values of each group field: keys among group_fields; required for every group "
    "field of a central campaign, so that which groups a release lists reveals nothing"
)
_ROUND = {"type": "string", "pattern": ROUND_PATTERN, "minLength": 1, "maxLength": MAX_ROUND_CHARS}
_POLICY_BODY = {
    "type": "object",
    "description": "central campaigns only: no ε-spending release before min_reports reports; a refresh only "
    "min_refresh_interval_seconds after the last ε-spending release",
    "required": ["min_reports", "min_refresh_interval_seconds"],
    "additionalProperties": False,
    "properties": {
        "min_reports": {"type": "integer", "minimum": 0, "maximum": MAX_MIN_REPORTS_BEFORE_RELEASE},
        "min_refresh_interval_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_REFRESH_INTERVAL_SECONDS},
    },
}
_NULLABLE_STR = {"type": "string", "nullable": True}
_BEARER: list[dict[str, list[str]]] = [{"bearerAuth": []}]
_PUBLIC: list[dict[str, list[str]]] = []


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_SHUFFLER = {
    "type": "object",
    "description": "shuffled campaigns only: the shuffler devices send to (its GET /api/v1/shuffler lists "
    "its keys) and the batch threshold",
    "required": ["url", "public_key", "verify_key", "min_batch"],
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "maxLength": SHUFFLER_URL_MAX_CHARS},
        "public_key": {"type": "string", "pattern": KEY_PATTERN},
        "verify_key": {"type": "string", "pattern": KEY_PATTERN},
        "min_batch": {"type": "integer", "minimum": SHUFFLE_MIN_BATCH_RANGE[0], "maximum": SHUFFLE_MIN_BATCH_RANGE[1]},
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    why = {
        400: "malformed request (not JSON, wrong shape, bad query parameter)",
        401: "missing or unknown bearer token",
        403: "the token's role may not call this route",
        404: "no such campaign",
        409: "conflict: campaign exists, is closed, the ε budget is spent, or the release policy refuses",
        413: "request body too large",
        415: "the body is not application/json",
        422: "a value is out of range (ε, categories, group field, level, ...)",
    }
    return {str(status): _json(_ref("Error"), why[status]) for status in statuses}


#: The central-only descriptor fields (in both the creation body and the descriptor).
_CENTRAL_OPTIONAL: dict[str, Any] = {
    "delta": {
        "type": "number",
        "nullable": True,
        "minimum": CENTRAL_DELTA_RANGE[0],
        "maximum": CENTRAL_DELTA_RANGE[1],
        "description": "central only: the δ of one Gaussian release, calibrated to (epsilon, delta)",
    },
    "budget_delta": {
        "type": "number",
        "nullable": True,
        "minimum": CENTRAL_DELTA_RANGE[0],
        "maximum": CENTRAL_DELTA_RANGE[1],
        "description": "central only: makes the budget (budget, budget_delta)-DP",
    },
    "budget_rho": {
        "type": "number",
        "nullable": True,
        "exclusiveMinimum": True,
        "minimum": 0,
        "maximum": MAX_RHO,
        "description": "central only: a zCDP budget ρ (instead of 'budget')",
    },
    "group_size": {
        "type": "integer",
        "nullable": True,
        "minimum": 1,
        "maximum": MAX_GROUP_SIZE,
        "description": "central only: reports one respondent may contribute (group privacy: g·ε)",
    },
}

_CAMPAIGN_ID = {
    "name": "campaign_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "the campaign's id (a slug)",
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string", "enum": ["ok"]}},
    },
    "Readiness": {
        "type": "object",
        "required": ["status", "checks"],
        "properties": {
            "status": {"type": "string", "enum": ["ready", "not_ready"]},
            "checks": {
                "type": "object",
                "description": "database (write probe in a transaction), keys (every open campaign's key "
                "usable), disk (free bytes above the floor); a failing check has ok=false and a reason",
                "additionalProperties": {
                    "type": "object",
                    "required": ["ok"],
                    "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
                },
            },
            "error": {
                "type": "object",
                "description": "present when not ready: code not_ready, message joining the reasons",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "CampaignCreate": {
        "type": "object",
        "required": ["id", "question", "categories", "epsilon"],
        "additionalProperties": False,
        "properties": {
            "id": _SLUG,
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "categories": {
                "type": "array",
                "minItems": MIN_CATEGORIES,
                "maxItems": MAX_CATEGORIES,
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_CATEGORY_CHARS},
            },
            "epsilon": {"type": "number", "minimum": CAMPAIGN_EPSILON[0], "maximum": CAMPAIGN_EPSILON[1]},
            "mechanism": {"type": "string", "enum": _MECHANISMS_AT_CREATE},
            "group_fields": {"type": "array", "maxItems": MAX_GROUP_FIELDS, "uniqueItems": True, "items": _SLUG},
            "trust_model": {"type": "string", "enum": list(TRUST_MODELS)},
            "budget": {
                "type": "number",
                "nullable": True,
                "exclusiveMinimum": True,
                "minimum": 0,
                "maximum": MAX_BUDGET,
            },
            "adjacency": {"type": "string", "nullable": True, "enum": [*ADJACENCIES, None]},
            "group_values": {
                "type": "object",
                "description": _GROUP_VALUES_DOC,
                "maxProperties": MAX_GROUP_FIELDS,
                "additionalProperties": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_GROUP_VALUES,
                    "uniqueItems": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_GROUP_VALUE_CHARS},
                },
            },
            **_CENTRAL_OPTIONAL,
            "recurring": {
                "type": "boolean",
                "description": "local campaigns only: collect in rounds (each report names its round, a "
                "device counts once per round, each round is estimated on its own)",
            },
            "release_policy": _POLICY_BODY,
            "shuffler": _SHUFFLER,
            "admission": {
                "type": "object",
                "description": "require an admission token with every report; the aggregator generates the "
                "issuer key",
                "required": ["tokens_per_account"],
                "additionalProperties": False,
                "properties": {
                    "tokens_per_account": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS_PER_ACCOUNT}
                },
            },
        },
    },
    "SurveyQuestion": {
        "type": "object",
        "description": "one question of a survey (format 3, docs/wire-format.md §3.2); the optional keys appear "
        "only when set",
        "required": ["id", "text", "kind", "epsilon", "mechanism", "params"],
        "properties": {
            "id": _SLUG,
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "kind": {"type": "string", "enum": list(KINDS)},
            "epsilon": {"type": "number", "description": "the ε this question's report runs at"},
            "mechanism": {"type": "string", "enum": _MECHANISMS_OF_QUESTIONS},
            "params": {"type": "object", "additionalProperties": {"type": "integer"}},
            "share": {"type": "integer", "minimum": QUESTION_SHARE[0], "maximum": QUESTION_SHARE[1],
                      "description": "per_question split only: the weight of the question's share of ε"},
            "optional": {"type": "boolean", "enum": [True], "description": "the device may skip the question"},
            "categories": {"type": "array", "items": {"type": "string"}, "description": "choice"},
            "bins": {"type": "array", "items": {"type": "number"},
                     "description": "choice: the edges of a number histogram, category i = [bins[i], bins[i+1])"},
            "options": {"type": "array", "items": {"type": "string"}, "description": "multi"},
            "max_selected": {"type": "integer", "minimum": 1, "description": "multi: the most options per answer"},
            "range": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                      "description": "number: [lo, hi]"},
            "steps": {"type": "integer", "minimum": NUMBER_STEPS[0], "maximum": NUMBER_STEPS[1],
                      "description": "number: the grid's equal steps over the range"},
            "clip": {"type": "boolean", "enum": [True],
                     "description": "out-of-range values are moved to the nearest end on the device"},
        },
    },
    "CampaignConfig": {
        "type": "object",
        "description": "a one-question campaign (format_version 1, 2: question, categories, mechanism, params) or "
        "a survey (format_version 3: title, questions, split)",
        "required": [
            "id", "epsilon", "group_fields", "public_key", "format_version", "suite", "status", "trust_model",
            "budget", "adjacency",
        ],
        "oneOf": [
            {"required": ["question", "categories", "mechanism", "params"]},
            {"required": ["title", "questions", "split"]},
        ],
        "properties": {
            "id": _SLUG,
            "question": {"type": "string"},
            "categories": {"type": "array", "items": {"type": "string"}},
            "epsilon": {"type": "number"},
            "mechanism": {"type": "string", "enum": _MECHANISMS_IN_DESCRIPTOR},
            "params": {"type": "object", "additionalProperties": {"type": "integer"}},
            "title": {"type": "string", "description": "format 3: the survey's title"},
            "questions": {"type": "array", "minItems": 1, "maxItems": MAX_QUESTIONS, "items": _ref("SurveyQuestion"),
                          "description": "format 3: the questions, in the order asked"},
            "split": {
                "type": "object",
                "description": "format 3: how the survey's ε is spent: every question at its share "
                "(per_question) or one uniformly drawn question at the whole ε (sampling); what was requested "
                "and why auto chose the mode",
                "required": ["mode", "requested", "reason"],
                "properties": {
                    "mode": {"type": "string", "enum": list(SPLIT_MODES)},
                    "requested": {"type": "string", "enum": list(SPLIT_REQUESTS)},
                    "reason": {"type": "string"},
                },
            },
            "group_fields": {"type": "array", "items": {"type": "string"}},
            "public_key": {"type": "string", "pattern": KEY_PATTERN},
            "format_version": {"type": "integer"},
            "suite": {"type": "string"},
            "status": {"type": "string", "enum": list(CAMPAIGN_STATUSES)},
            "trust_model": {"type": "string", "enum": list(TRUST_MODELS)},
            "budget": _NUM_OR_NULL,
            "adjacency": {"type": "string", "nullable": True},
            "group_values": {
                "type": "object",
                "description": _GROUP_VALUES_DOC + " (present only when declared)",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
            **_CENTRAL_OPTIONAL,
            "recurring": {
                "type": "boolean",
                "enum": [True],
                "description": "present (and true) only for a recurring campaign, which collects in rounds",
            },
            "shuffler": _SHUFFLER,
            "admission": {
                "type": "object",
                "description": "present only when every report must carry an admission token (Privacy Pass, "
                "blind RSA): the issuer's public key and how many tokens one account may get",
                "required": ["type", "token_type", "issuer_key", "tokens_per_account"],
                "properties": {
                    "type": {"type": "string", "enum": ["privacy-pass-blind-rsa"]},
                    "token_type": {"type": "integer", "enum": [TOKEN_TYPE]},
                    "issuer_key": {"type": "string", "description": "base64url DER SubjectPublicKeyInfo"},
                    "tokens_per_account": {"type": "integer", "minimum": 1},
                },
            },
        },
    },
    "CampaignSummary": {
        "allOf": [
            _ref("CampaignConfig"),
            {
                "type": "object",
                "required": ["n_reports", "epsilon_spent", "created_at", "closed_at"],
                "properties": {
                    "n_reports": {
                        "type": "integer",
                        "minimum": 0,
                        "nullable": True,
                        "description": "null for an analyst when the campaign is central "
                        "under add-remove adjacency (the participant count is private there)",
                    },
                    "epsilon_spent": {"type": "number"},
                    "created_at": {"type": "string"},
                    "closed_at": {"type": "string", "nullable": True},
                },
            },
        ]
    },
    "CampaignList": {
        "type": "object",
        "required": ["campaigns", "total", "offset", "next_offset"],
        "properties": {
            "campaigns": {"type": "array", "items": _ref("CampaignSummary")},
            "total": {"type": "integer", "minimum": 0, "description": "campaigns matching the filter"},
            "offset": {"type": "integer", "minimum": 0},
            "next_offset": {
                "type": "integer",
                "nullable": True,
                "description": "the offset of the next page, null on the last one",
            },
        },
    },
    "Timeline": {
        "type": "object",
        "required": ["campaign_id", "bucket", "round", "total", "buckets"],
        "additionalProperties": False,
        "properties": {
            "campaign_id": {"type": "string"},
            "bucket": {"type": "string", "enum": list(TIMELINE_BUCKETS)},
            "round": {"type": "string", "nullable": True},
            "total": {"type": "integer", "minimum": 0},
            "buckets": {
                "type": "array",
                "description": "UTC hours or days from the first with reports to the last, zero-filled",
                "maxItems": TIMELINE_MAX_BUCKETS,
                "items": {
                    "type": "object",
                    "required": ["start", "reports"],
                    "additionalProperties": False,
                    "properties": {
                        "start": {"type": "string", "description": "the bucket's first instant, ISO 8601 UTC"},
                        "reports": {"type": "integer", "minimum": 0},
                    },
                },
            },
        },
    },
    "Envelope": {
        "type": "object",
        "description": "one sealed report (docs/wire-format.md §6); format version 2 (new campaigns) also "
        "carries the device's campaign key and its signature (the proof of possession, §5.2)",
        "required": ["v", "report_id", "pseudonym", "ct"],
        "additionalProperties": False,
        "properties": {
            "v": {"type": "integer"},
            "report_id": {"type": "string", "pattern": REPORT_ID_PATTERN},
            "pseudonym": {"type": "string", "pattern": PSEUDONYM_PATTERN},
            "device_key": {"type": "string", "pattern": KEY_PATTERN},
            "ct": {"type": "string", "pattern": BASE64URL_PATTERN},
            "sig": {"type": "string", "pattern": SIGNATURE_PATTERN},
        },
    },
    "ReportBatch": {
        "type": "object",
        "required": ["reports"],
        "additionalProperties": False,
        "properties": {
            "reports": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "description": "envelopes (see Envelope); an item that is not a valid envelope is rejected "
                "on its own in the reply, it never fails the batch",
                "items": {},
            }
        },
    },
    "BatchResult": {
        "type": "object",
        "required": ["results", "accepted", "duplicate", "rejected"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["report_id", "status", "reason"],
                    "properties": {
                        "report_id": {"type": "string", "nullable": True},
                        "status": {"type": "string", "enum": ["accepted", "duplicate", "rejected"]},
                        "reason": {"type": "string", "nullable": True},
                    },
                },
            },
            "accepted": {"type": "integer", "minimum": 0},
            "duplicate": {"type": "integer", "minimum": 0},
            "rejected": {"type": "integer", "minimum": 0},
        },
    },
    "CategoryEstimate": {
        "type": "object",
        "required": [
            "category", "count", "stderr", "ci", "proportion", "proportion_stderr", "proportion_ci",
            "consistent_count",
        ],
        "properties": {
            "category": {"type": "string"},
            **_ROW_FIGURES,
            "consistent_count": _NUM_OR_NULL,
        },
    },
    "Estimate": {
        "type": "object",
        "description": "ungrouped: n, epsilon, mechanism, level and per category the unbiased count with "
        "stderr and CI, proportion with stderr and CI, and the consistent (biased) count. Grouped "
        "(group_by): 'groups' maps each group value to such an estimate. Central campaigns add noise, "
        "scale, epsilon_spent, epsilon_remaining and budget. Shuffled campaigns add 'privacy'.",
        "required": ["campaign_id", "trust_model", "epsilon", "level"],
        "properties": {
            "campaign_id": {"type": "string"},
            "privacy": {
                "type": "object",
                "description": "shuffled campaigns: epsilon0 (each report's local ε), delta, min_batch, the number "
                "of batches received, the smallest, and the central epsilon of the smallest batch (null before "
                "any) with the bound's method and both bounds",
                "properties": {
                    "epsilon0": {"type": "number"},
                    "delta": {"type": "number"},
                    "min_batch": {"type": "integer"},
                    "batches": {"type": "integer"},
                    "smallest_batch": {"type": "integer", "nullable": True},
                    "epsilon": {"type": "number", "nullable": True},
                    "method": {"type": "string", "nullable": True},
                    "bounds": {"type": "object", "nullable": True},
                },
            },
            "trust_model": {"type": "string", "enum": list(TRUST_MODELS)},
            "mechanism": {"type": "string"},
            "epsilon": {"type": "number"},
            "n": {"type": "integer", "minimum": 0},
            "level": {"type": "number"},
            "categories": {"type": "array", "items": _ref("CategoryEstimate")},
            "interval": {
                "type": "object",
                "description": "how each 'ci' was computed: "
                + "; ".join(f"'{name}': {text}" for name, text in INTERVAL_METHODS.items()),
                "properties": {
                    "method": {"type": "string", "enum": list(INTERVAL_METHODS)},
                    "description": {"type": "string"},
                },
            },
            "consistent": {
                "type": "object",
                "properties": {"biased": {"type": "boolean", "enum": [True]}, "method": {"type": "string"}},
            },
            "unbiased": _UNBIASED,
            "round": {"type": "string", "description": "the round estimated (recurring campaigns only)"},
            "group_by": {"type": "string"},
            "next_group_after": {
                "type": "string",
                "description": "present when more groups follow: pass it as group_after for the next page",
            },
            "groups": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["n", "categories"],
                    "properties": {
                        "n": {"type": "integer", "minimum": 0},
                        "categories": {"type": "array", "items": _ref("CategoryEstimate")},
                        "unbiased": _UNBIASED,
                    },
                },
            },
            "epsilon_spent": {"type": "number"},
            "epsilon_remaining": {"type": "number"},
            "budget": _NUM_OR_NULL,
            "cost": {
                "type": "object",
                "description": "central: this release's privacy cost in its natural form (kind pure, zcdp or "
                "approx; exact rationals as 'num/den' strings) and as text",
            },
            "accountant": {
                "type": "object",
                "description": "central: the totals of every release in each form (epsilon_sum, delta_sum, "
                "rho, and epsilon at delta by the best rule and by each rule), spent and left",
            },
        },
    },
    "SurveyRow": {
        "type": "object",
        "description": "one category (choice) or option (multi) of a survey question: the count of holders "
        "among the respondents it speaks for, its stderr and CI, the proportion with stderr and CI; under "
        "the sampling split also sampling_stderr, the part of the stderr that sampling who answers adds",
        "required": ["count", "stderr", "ci"],
        "properties": {
            "category": {"type": "string"},
            "option": {"type": "string"},
            **_ROW_FIGURES,
            "sampling_stderr": _NUM_OR_NULL,
        },
    },
    "QuestionEstimate": {
        "type": "object",
        "description": "one question's estimate: 'categories' (choice), 'options' (multi) or 'mean' (number); "
        "n is the number of respondents the estimate speaks for (central: public only where noted), "
        "answered the reports that answered it, skipped those that skipped it (optional questions)",
        "required": ["question", "kind"],
        "properties": {
            "question": {"type": "string"},
            "text": {"type": "string"},
            "kind": {"type": "string", "enum": list(KINDS)},
            "split": {"type": "string", "enum": list(SPLIT_MODES)},
            "trust_model": {"type": "string", "enum": ["local", "central"]},
            "mechanism": {"type": "string"},
            "epsilon": {"type": "number"},
            "n": {"type": "integer", "minimum": 0, "nullable": True},
            "answered": {"type": "integer"},
            "skipped": {"type": "integer", "minimum": 0},
            "level": {"type": "number"},
            "interval": {"type": "object", "properties": {"method": {"type": "string"},
                                                          "description": {"type": "string"}}},
            "categories": {"type": "array", "items": _ref("SurveyRow")},
            "options": {"type": "array", "items": _ref("SurveyRow")},
            "mean": {
                "type": "object",
                "required": ["mean", "stderr", "ci", "range"],
                "properties": {
                    "mean": _NUM_OR_NULL, "stderr": _NUM_OR_NULL, "ci": _INTERVAL, "sampling_stderr": _NUM_OR_NULL,
                    "range": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                },
            },
            "unbiased": {"type": "object"},
            "cached": {"type": "boolean", "description": "central: served from the kept release (spent nothing)"},
            "cost": {"type": "object", "description": "central: this question's release cost"},
            "released_at": {"type": "string"},
        },
    },
    "SurveyEstimate": {
        "type": "object",
        "description": "a survey (format 3): every question's estimate (or the one ?question= names), overall "
        "or per group ('groups' maps each group value to {n, questions}); central surveys add the "
        "accountant's totals after the releases this request made",
        "required": ["campaign_id", "trust_model", "split", "level"],
        "properties": {
            "campaign_id": {"type": "string"},
            "trust_model": {"type": "string", "enum": ["local", "central"]},
            "split": {"type": "object", "properties": {"mode": {"type": "string"}, "requested": {"type": "string"},
                                                       "reason": {"type": "string"}}},
            "n": {"type": "integer", "minimum": 0, "nullable": True},
            "level": {"type": "number"},
            "round": {"type": "string"},
            "questions": {"type": "array", "items": _ref("QuestionEstimate")},
            "group_by": {"type": "string"},
            "next_group_after": {"type": "string"},
            "groups": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["questions"],
                    "properties": {"n": {"type": "integer", "minimum": 0},
                                   "questions": {"type": "array", "items": _ref("QuestionEstimate")}},
                },
            },
            "noise": {"type": "string"},
            "adjacency": {"type": "string"},
            "accountant": {"type": "object"},
        },
    },
    "Rounds": {
        "type": "object",
        "required": ["campaign_id", "recurring", "rounds"],
        "additionalProperties": False,
        "properties": {
            "campaign_id": {"type": "string"},
            "recurring": {"type": "boolean"},
            "rounds": {
                "type": "array",
                "description": "the rounds holding reports, in label order (empty for a non-recurring campaign)",
                "items": {
                    "type": "object",
                    "required": ["round", "n"],
                    "additionalProperties": False,
                    "properties": {"round": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
                },
            },
        },
    },
    "ReleasePolicyBody": _POLICY_BODY,
    "TokenIssue": {
        "type": "object",
        "required": ["account", "token_requests"],
        "additionalProperties": False,
        "properties": {
            "account": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_ACCOUNT_CHARS,
                "description": "the app backend's opaque id of the user (stored only as an HMAC)",
            },
            "token_requests": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_TOKEN_REQUESTS,
                "items": {"type": "string", "description": "a TokenRequest (RFC 9578 type 0x0002) in base64url"},
            },
        },
    },
    "TokenIssueResult": {
        "type": "object",
        "required": ["campaign_id", "token_responses", "issued", "tokens_per_account", "remaining"],
        "additionalProperties": False,
        "properties": {
            "campaign_id": {"type": "string"},
            "token_responses": {"type": "array", "items": {"type": "string"}},
            "issued": {"type": "integer", "minimum": 1},
            "tokens_per_account": {"type": "integer", "minimum": 1},
            "remaining": {"type": "integer", "minimum": 0},
        },
    },
    "ReleasePolicy": {
        "type": "object",
        "required": [
            "campaign_id",
            "min_reports",
            "min_refresh_interval_seconds",
            "default",
            "updated_at",
            "updated_by",
            "next_refresh_at",
        ],
        "additionalProperties": False,
        "properties": {
            "campaign_id": {"type": "string"},
            "min_reports": {"type": "integer", "minimum": 0},
            "min_refresh_interval_seconds": {"type": "integer", "minimum": 0},
            "default": {"type": "boolean", "description": "true until the admin sets a policy"},
            "updated_at": _NULLABLE_STR,
            "updated_by": _NULLABLE_STR,
            "next_refresh_at": {
                "type": "string",
                "nullable": True,
                "description": "earliest time (UTC) a refresh passes the interval rule; null: now",
            },
        },
    },
    "Releases": {
        "type": "object",
        "required": [
            "campaign_id",
            "budget",
            "epsilon_spent",
            "epsilon_remaining",
            "policy",
            "releases",
            "next_after",
        ],
        "additionalProperties": False,
        "properties": {
            "campaign_id": {"type": "string"},
            "budget": {"type": "number"},
            "epsilon_spent": {"type": "number"},
            "epsilon_remaining": {"type": "number"},
            "accountant": {
                "type": "object",
                "description": "the logged costs composed by the best valid rule, in every form, with spent and "
                "left in the budget's own terms (as in a release body)",
            },
            "policy": _ref("ReleasePolicy"),
            "releases": {
                "type": "array",
                "description": "every release that spent ε, oldest first",
                "items": {
                    "type": "object",
                    "required": ["seq", "released_at", "role", "epsilon", "cost", "release_key", "parameters"],
                    "additionalProperties": False,
                    "properties": {
                        "seq": {"type": "integer", "minimum": 1},
                        "released_at": {"type": "string"},
                        "role": {"type": "string"},
                        "epsilon": {"type": "number"},
                        "cost": {
                            "type": "object",
                            "nullable": True,
                            "description": "the privacy cost in the accountant's form, e.g. epsilon and delta",
                        },
                        "release_key": {"type": "string"},
                        "parameters": {"type": "object"},
                    },
                },
            },
            "next_after": {
                "type": "integer",
                "nullable": True,
                "description": "pass as 'after' for the next page; null when this is the last",
            },
        },
    },
}

_PATHS: dict[str, Any] = {
    "/healthz": {
        "get": {
            "operationId": "health",
            "summary": "Liveness and readiness",
            "security": _PUBLIC,
            "responses": {"200": _json(_ref("Health"), "the service and its database answer")},
        }
    },
    "/readyz": {
        "get": {
            "operationId": "readiness",
            "summary": "Readiness: a write probe, every open campaign's key, free disk above the floor",
            "security": _PUBLIC,
            "responses": {
                "200": _json(_ref("Readiness"), "the service can take reports now"),
                "503": _json(_ref("Readiness"), "not ready; each failing check says why (Retry-After)"),
            },
        }
    },
    "/api/v1/openapi.json": {
        "get": {
            "operationId": "openapi",
            "summary": "This document",
            "security": _PUBLIC,
            "responses": {"200": _json({"type": "object"}, "the OpenAPI document")},
        }
    },
    "/api/v1/campaigns": {
        "post": {
            "operationId": "createCampaign",
            "summary": "Create a campaign and its HPKE key pair (admin)",
            "security": _BEARER,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("CampaignCreate")}},
            },
            "responses": {
                "201": _json(_ref("CampaignConfig"), "the campaign's public config"),
                **_errors(400, 401, 403, 409, 413, 415, 422),
            },
        },
        "get": {
            "operationId": "listCampaigns",
            "summary": "List campaigns, oldest first, a page at a time (analyst or admin)",
            "security": _BEARER,
            "parameters": [
                {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(CAMPAIGN_STATUSES)}},
                {
                    "name": "limit",
                    "in": "query",
                    "description": f"campaigns per page (default {CAMPAIGN_PAGE_DEFAULT})",
                    "schema": {"type": "integer", "minimum": 1, "maximum": CAMPAIGN_PAGE_MAX},
                },
                {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            ],
            "responses": {"200": _json(_ref("CampaignList"), "a page of campaigns"), **_errors(400, 401, 403, 422)},
        },
    },
    "/api/v1/campaigns/{campaign_id}": {
        "get": {
            "operationId": "getCampaign",
            "summary": "The public config a device needs",
            "security": _PUBLIC,
            "parameters": [_CAMPAIGN_ID],
            "responses": {"200": _json(_ref("CampaignConfig"), "the campaign's config"), **_errors(404)},
        }
    },
    "/api/v1/campaigns/{campaign_id}/summary": {
        "get": {
            "operationId": "campaignSummary",
            "summary": "One campaign with its counters, as the list shows it (analyst)",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "responses": {"200": _json(_ref("CampaignSummary"), "the campaign"), **_errors(401, 403, 404)},
        }
    },
    "/api/v1/campaigns/{campaign_id}/timeline": {
        "get": {
            "operationId": "timeline",
            "summary": "Accepted reports per UTC hour or day (analyst; central campaigns: admin only)",
            "security": _BEARER,
            "parameters": [
                _CAMPAIGN_ID,
                {"name": "bucket", "in": "query", "schema": {"type": "string", "enum": list(TIMELINE_BUCKETS)}},
                {
                    "name": "round",
                    "in": "query",
                    "description": "recurring campaigns: one round (default: every report)",
                    "schema": _ROUND,
                },
            ],
            "responses": {"200": _json(_ref("Timeline"), "the timeline"), **_errors(400, 401, 403, 404, 422)},
        }
    },
    "/api/v1/campaigns/{campaign_id}/close": {
        "post": {
            "operationId": "closeCampaign",
            "summary": "Close a campaign (admin); idempotent",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "responses": {
                "200": _json(_ref("CampaignConfig"), "the config, now closed"),
                **_errors(401, 403, 404),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/reports": {
        "post": {
            "operationId": "submitReports",
            "summary": f"Upload 1 to {MAX_BATCH} encrypted reports (public: devices are anonymous)",
            "security": _PUBLIC,
            "parameters": [_CAMPAIGN_ID],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ReportBatch")}},
            },
            "responses": {
                "200": _json(_ref("BatchResult"), "each report accepted, duplicate or rejected; accepted "
                             "ones are durably stored"),
                **_errors(400, 404, 409, 413, 415),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/batches": {
        "post": {
            "operationId": "submitShuffledBatch",
            "summary": "A shuffled campaign's batch from its shuffler: signed by the shuffler's registered "
            "Ed25519 key, at least the campaign's min_batch inner ciphertexts, stored once per batch_id",
            "security": _PUBLIC,
            "parameters": [_CAMPAIGN_ID],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["batch_id", "reports", "sig"],
                            "additionalProperties": False,
                            "properties": {
                                "batch_id": {"type": "string", "pattern": REPORT_ID_PATTERN},
                                "reports": {"type": "array", "items": {"type": "string"}},
                                "sig": {"type": "string"},
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "properties": {
                            "batch_id": {"type": "string"},
                            "status": {"type": "string", "enum": ["accepted", "duplicate"]},
                            "n": {"type": "integer"},
                            "accepted": {"type": "integer"},
                            "rejected": {"type": "integer"},
                        },
                    },
                    "the batch is stored (or was already): durable when this returns",
                ),
                **_errors(400, 403, 404, 409, 413, 415),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/estimate": {
        "get": {
            "operationId": "estimate",
            "summary": "Estimates with stderr and CI (analyst); central campaigns spend ε per release",
            "security": _BEARER,
            "parameters": [
                _CAMPAIGN_ID,
                {
                    "name": "round",
                    "in": "query",
                    "description": "recurring campaigns: the round to estimate (required there, refused "
                    "elsewhere); GET .../rounds lists them",
                    "schema": _ROUND,
                },
                {"name": "group_by", "in": "query", "schema": {"type": "string", "maxLength": MAX_QUERY_CHARS}},
                {
                    "name": "question",
                    "in": "query",
                    "description": "surveys: estimate only this question (its id); a central survey then "
                    "releases (and charges) only this question",
                    "schema": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                },
                {
                    "name": "group_after",
                    "in": "query",
                    "description": "local grouped estimates: list the groups after this value (the "
                    "'next_group_after' of the previous page)",
                    "schema": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                },
                {
                    "name": "level",
                    "in": "query",
                    "schema": {
                        "type": "number",
                        "exclusiveMinimum": True,
                        "minimum": 0,
                        "exclusiveMaximum": True,
                        "maximum": 1,
                    },
                },
                {
                    "name": "noise",
                    "in": "query",
                    "description": "central campaigns only",
                    "schema": {"type": "string", "enum": ["discrete-laplace", "laplace", "gaussian"]},
                },
                {
                    "name": "sample",
                    "in": "query",
                    "description": "central campaigns only (add-remove): a Poisson-subsampling rate q in (0, 1] "
                    "applied before the noise; costs ln(1 + q(e^epsilon - 1)) instead of epsilon",
                    "schema": {"type": "number", "exclusiveMinimum": True, "minimum": 0, "maximum": 1},
                },
                {
                    "name": "refresh",
                    "in": "query",
                    "description": "central campaigns only: draw a new release over the current reports "
                    "(spends epsilon) instead of serving the stored one (free)",
                    "schema": {"type": "boolean"},
                },
            ],
            "responses": {
                "200": _json({"oneOf": [_ref("Estimate"), _ref("SurveyEstimate")]},
                             "the estimate: of the one question (formats 1 and 2), or of a survey's questions"),
                **_errors(400, 401, 403, 404, 409, 422),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/top": {
        "get": {
            "operationId": "getTopAnswers",
            "summary": "The j most common answers of a central campaign by the exponential mechanism, with its "
            "utility bound; charged to the budget like a release (analyst)",
            "security": _BEARER,
            "parameters": [
                _CAMPAIGN_ID,
                {"name": "j", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TOP}},
                {"name": "refresh", "in": "query", "schema": {"type": "boolean"}},
            ],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["campaign_id", "mechanism", "j", "answers", "cost", "utility", "accountant"],
                        "properties": {
                            "campaign_id": {"type": "string"},
                            "mechanism": {"type": "string", "enum": ["exponential"]},
                            "j": {"type": "integer"},
                            "answers": {"type": "array", "items": {"type": "string"}},
                            "indices": {"type": "array", "items": {"type": "integer"}},
                            "sampling": {"type": "string", "description": "how the answers were drawn"},
                            "cost": {"type": "object"},
                            "utility": {"type": "object"},
                            "accountant": {"type": "object"},
                            "cached": {"type": "boolean"},
                        },
                    },
                    "the answers",
                ),
                **_errors(400, 401, 403, 404, 409, 422),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/rounds": {
        "get": {
            "operationId": "listRounds",
            "summary": "The rounds of a recurring campaign that hold reports, with their counts (analyst)",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "responses": {"200": _json(_ref("Rounds"), "the rounds"), **_errors(401, 403, 404)},
        }
    },
    "/api/v1/campaigns/{campaign_id}/tokens": {
        "post": {
            "operationId": "issueTokens",
            "summary": "Blind-sign an account's admission-token requests (issuer: the app's backend)",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("TokenIssue")}}},
            "responses": {
                "200": _json(_ref("TokenIssueResult"), "one blind signature per request, in order"),
                **_errors(400, 401, 403, 404, 409, 413, 415, 422),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/releases": {
        "get": {
            "operationId": "listReleases",
            "summary": "Every release of a central campaign that spent ε: who, when, ε, parameters (analyst)",
            "security": _BEARER,
            "parameters": [
                _CAMPAIGN_ID,
                {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": RELEASES_PAGE_MAX},
                },
            ],
            "responses": {
                "200": _json(_ref("Releases"), "a page of the release log"),
                **_errors(400, 401, 403, 404, 422),
            },
        }
    },
    "/api/v1/campaigns/{campaign_id}/release-policy": {
        "get": {
            "operationId": "getReleasePolicy",
            "summary": "The release policy of a central campaign (analyst)",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "responses": {"200": _json(_ref("ReleasePolicy"), "the policy"), **_errors(401, 403, 404, 422)},
        },
        "put": {
            "operationId": "setReleasePolicy",
            "summary": "Replace the release policy of a central campaign (admin)",
            "security": _BEARER,
            "parameters": [_CAMPAIGN_ID],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("ReleasePolicyBody")}}},
            "responses": {
                "200": _json(_ref("ReleasePolicy"), "the new policy"),
                **_errors(400, 401, 403, 404, 413, 415, 422),
            },
        },
    },
}

#: The document (do not mutate; :func:`document` returns a copy).
DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "deniable aggregator",
        "version": "1",
        "description": "Local differential privacy: devices send ε-randomized, HPKE-encrypted reports; "
        "analysts read unbiased estimates with standard errors and confidence intervals.",
    },
    "servers": [{"url": "/"}],
    "paths": _PATHS,
    "components": {
        "schemas": _SCHEMAS,
        "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
    },
}


def document() -> dict[str, Any]:
    """A fresh copy of :data:`DOCUMENT`, with the mechanisms the registry lists now
    (``deniable.shared.mechanisms.registry``: one registered later is named too)."""
    doc = copy.deepcopy(DOCUMENT)
    schemas = doc["components"]["schemas"]
    schemas["CampaignCreate"]["properties"]["mechanism"]["enum"] = ["auto", *_in_descriptor()]
    schemas["CampaignConfig"]["properties"]["mechanism"]["enum"] = _in_descriptor()
    schemas["SurveyQuestion"]["properties"]["mechanism"]["enum"] = _of_questions()
    return doc
