"""Every sentence the runtime writes to the model, in one place a host can replace.

``Texts()`` is English; ``Texts.chinese()`` (or ``Texts.for_language("zh")``) is Simplified
Chinese. Any field can be overridden on top of either, with ``Texts(field=...)`` or
``texts.replace(field=...)``. Each field has a fixed set of ``{placeholders}`` (those of its
English default); an override that misses one, adds one, uses a positional ``{}`` or is not a
valid format string is refused with ``UsageError`` when the ``Texts`` is built, so a bad
override fails at configuration time, not as a broken prompt in the middle of a run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from steadyrun._errors import UsageError
from steadyrun._texts_check import check_field, check_names, language_code, names
from steadyrun._texts_zh import CHINESE

__all__ = ["LANGUAGES", "PLACEHOLDERS", "Texts", "default_texts", "texts_of"]

LANGUAGES: Mapping[str, str] = MappingProxyType({"en": "English", "zh": "Simplified Chinese"})
"""The built-in languages: code -> name."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Texts:
    """Model-visible texts the runtime writes. Replace any of them with ``Runtime(texts=...)``.

    Values are ``str.format`` templates; every placeholder receives text. Write literal braces
    as ``{{`` and ``}}``. ``docs/texts.md`` lists each field with its placeholders.

    Attributes:
        cancelled: A queued call dropped because new input arrived.
        not_carried: A call of the open batch at a fork point, which the fork does not run
            (``Runtime.fork``; its outcome belongs to the run forked from).
        interrupted_replayable: A replayable call a crash interrupted.
        interrupted: A call without side effects a crash interrupted.
        needs_review: A call with side effects a crash interrupted (outcome unknown).
        interrupted_detail: One of the three above, with why the call's outcome is unknown.
        tool_host_failure: Why: the host failed while the tool ran.
        tool_host_failure_hidden: Why, when the runtime keeps the failure's message from the
            model (``Runtime(host_failure_details=False)``).
        tool_timed_out: Why: the tool ran past its timeout (``{timeout}`` in seconds).
        tool_cancelled: Why: the tool's task was cancelled.
        unknown_tool: The model called a tool that does not exist.
        no_tools: ``{available}`` of ``unknown_tool`` when the agent has no tools.
        tool_removed: A call that waited (for a decision or an answer) while the run was
            suspended, whose tool the agent no longer has when the run resumes; it never runs.
        tool_changed: A call that waited for a decision, whose tool's schema changed while the
            run was suspended and no longer accepts its arguments (``{error}``: the problems,
            as in ``invalid_arguments``); it never runs.
        invalid_arguments: A call's arguments do not fit the tool's schema.
        garbled_arguments: ``{error}`` of ``invalid_arguments``: a call's name or arguments
            hold text no store can encode (a lone surrogate); the call never runs.
        args_separator: Joins the problems of one call's arguments in ``{error}`` of
            ``invalid_arguments``; each problem is one of the ``arg*`` fields below.
        args_whole: ``{path}`` of a problem with the arguments as a whole.
        args_not_json: The arguments are not JSON (where the parser stopped).
        args_not_object: The arguments are JSON but not an object (``{got}``: what they are).
        arg_missing: A required argument is missing.
        field_missing: A required field inside an argument is missing.
        arg_unknown: An argument the tool does not take (``{expected}``: those it takes).
        arg_unknown_none: An argument given to a tool that takes none.
        field_unknown: A field inside an argument that its type does not have.
        arg_type: A value of the wrong JSON type (``{expected}``: ``integer``, ``string``...).
        arg_choice: A value that is not one of those allowed (``{allowed}``, as JSON).
        arg_bound: A number out of range (``{bound}``: ``>= 1``, ``< 10``...).
        arg_multiple: A number that is not a multiple of ``{factor}``.
        arg_too_short: A text or list shorter than ``{limit}``.
        arg_too_long: A text or list longer than ``{limit}``.
        arg_pattern: A text that does not match the regular expression ``{pattern}``.
        arg_invalid: Any other problem, in the validator's words (``{error}``): those of a
            check of the tool's own types, or of pydantic or jsonschema.
        args_more: The number of problems left out (past eight).
        tool_error: A tool (or its policy or scheduling) raised.
        bad_policy_outcome: ``{error}`` of ``tool_error``: a policy returned something else.
        result_unstorable: ``{error}`` of ``tool_error``: the result is not storable.
        result_not_json: A tool ran and returned a value with no JSON form (``{kind}`` is its
            type).
        complete_outside_completion: ``{error}`` of ``tool_error``: misuse of ``complete()``.
        completion_unstorable: ``{error}`` of ``tool_error``: the completion is not storable.
        handover_unstorable: ``{error}`` of ``tool_error``: a payload or state is not storable.
        unsupported_signal: ``{error}`` of ``tool_error``: an unknown control signal.
        length_cut: The model's tool calls were cut by the output length limit.
        length_cut_text: The model's answer was cut by the output length limit
            (``Agent(correct_length_cut=True)``).
        cannot_suspend: A tool needs to wait, where runs cannot wait (sub-agents).
        cannot_detach: A tool detaches, where runs cannot wait (sub-agents).
        refused: The host refused a call as it was handed over.
        rejected: A reviewer rejected a confirmation (``{reason}`` is ``rejected_reason`` or
            empty).
        rejected_reason: The reviewer's reason, as appended to ``rejected``.
        edited_arguments: Put before a result when a reviewer edited the arguments.
        settled_result: Input posted when the host settles a detached or submitted call with a
            result (``Runtime(post_settlements=True)``).
        settled_error: ...and when the host settles it with an error.
        completion_not_alone: A completion tool was called together with other calls.
        completion_rejected: The agent's completion validator rejected a completion.
        offload_note: After the preview of a result too large for the context.
        result_truncated: After the part shown of a result over its tool's size bound
            (``max_result_chars``), where it cannot be offloaded.
        cleared_note: In place of an old result cleared to save context.
        cleared_note_plain: In place of a cleared result without a reference.
        read_unknown_ref: The read tool was given a reference it does not know.
        read_range: After a part of a result read with the read tool.
        read_range_more: After a part of a result read with the read tool, when more follows.
        summary_instruction: The instructions of the summary call.
        summary_request: The user message of the summary call.
        summary_omitted: Before a transcript whose oldest part did not fit the summary call.
        summary_marker: The message that replaces the summarized part of a conversation.
        transcript_summary: An earlier summary, in a transcript to summarize.
        transcript_thinking: A thinking part, in a transcript to summarize.
        transcript_call: A tool call, in a transcript to summarize.
        transcript_result: A tool result, in a transcript to summarize.
        transcript_error: A tool error, in a transcript to summarize.
        planning_instructions: The planning extension's instructions.
        planning_current_plan: The plan, after the planning instructions.
        plan_created: Result of ``create_task``.
        plan_updated: Result of ``update_task``.
        plan_task_notes: A task's notes, after the task in the result of ``get_task``.
        plan_empty: Result of ``list_tasks`` for an empty plan.
        plan_needs_title: Error: a task without a title.
        plan_full: Error: the plan holds its maximum number of tasks.
        plan_bad_status: Error: an unknown task status.
        plan_unknown_task: Error: an unknown task id.
        plan_no_tasks: ``{known}`` of ``plan_unknown_task`` when the plan is empty.
        search_no_match: Result of the tool search when nothing matches.
        search_found: Result of the tool search: the tools it made available.
        tool_not_found_yet: A deferred tool was called before the search made it available.
        subagent_instructions: The instructions of the general sub-agent.
        subagent_output_instructions: Added to a typed delegate's instructions.
        subagent_use_output_tool: Correction when a typed delegate answers in text.
        subagent_failed: Error of a delegation whose sub-agent did not finish.
        subagent_would_wait: ``{why}`` of ``subagent_failed`` when the sub-agent had to wait.
        subagent_follow_up: Tells the main agent what a sub-agent answered in a later turn
            (its background task ended after the delegation returned).
        subagent_follow_up_failed: The same, when that later turn did not finish.
        delegation_interrupted: A delegation a crash interrupted during a side effect.
        delegate_description: The description of the general ``delegate`` tool.
        delegate_task_arg: The description of the ``task`` argument of delegate tools.
        submit_result_description: The description of a typed delegate's ``submit_result``.
        submit_result_arg: The description of the ``result`` argument of ``submit_result``.
        subagent_hit_limit: ``{why}`` of ``subagent_failed``: the sub-agent reached a limit.
        subagent_over_budget: ``{why}`` of ``subagent_failed``: the sub-agent used up a budget
            of its ``Limits`` (``{measure}``: requests, total_tokens...; ``{limit}``: its limit).
        subagent_bad_output: ``{why}`` of ``subagent_failed``: its answers could not be used.
        subagent_filtered: ``{why}`` of ``subagent_failed``: a content filter stopped it.
        subagent_model_failed: ``{why}`` of ``subagent_failed``: its model call failed.
        work_interrupted: A call driving a sub-agent (a forked skill) a crash interrupted
            during a side effect (``{what}`` is ``skill_what``).
        skills_instructions: The skills extension's instructions.
        skills_fork_instructions: Added to them when a skill runs in a sub-agent.
        skills_available: The skills, after the skills instructions.
        skill_forked_mark: After the name of a skill that runs in a sub-agent, in listings.
        skills_empty: Result of ``list_skills`` when there are no skills.
        skills_none: ``{known}`` of ``skill_unknown`` when there are no skills.
        skill_unknown: Error: an unknown skill.
        skill_loaded: Result of ``load_skill``: the skill's instructions.
        skill_resources: After the instructions: the skill's resource files.
        skill_fork_in_subagent: Error: a sub-agent loads a skill that runs in a sub-agent.
        skill_fork_needs_task: Error: a skill that runs in a sub-agent was loaded without a task.
        skill_failed: Error of a skill whose sub-agent did not finish.
        skill_fork_preamble: The instructions of a skill's sub-agent, before the skill's own.
        skill_what: ``{what}`` of ``work_interrupted`` for a skill.
        skill_resource_no_path: Error of ``read_skill_resource``: no path given.
        skill_resource_absolute: Error of ``read_skill_resource``: an absolute path.
        skill_resource_up: Error of ``read_skill_resource``: a path going up with ``..``.
        skill_resource_unknown: Error of ``read_skill_resource``: not a resource of the skill.
        skill_resources_none: ``{resources}`` of ``skill_resource_unknown`` when it has none.
        skill_resource_outside: Error of ``read_skill_resource``: a link leading outside.
        skill_resource_unreadable: Error of ``read_skill_resource``: the file cannot be read.
        skill_resource_too_large: Error of ``read_skill_resource``: the file is too large.
        skill_resource_not_text: Error of ``read_skill_resource``: the file is not UTF-8 text.
        memory_tools_instructions: The memory extension's instructions, with its tools.
        memory_recalled: The memories recalled for the turn, in the instructions.
        memory_remembered: Result of ``remember``.
        memory_already: Result of ``remember`` for a memory already kept.
        memory_forgot: Result of ``forget``.
        memory_unknown: Result of ``forget`` for an unknown memory.
        memory_extract_instructions: The instructions of the memory extraction call.
        memory_extract_prompt: The user message of the memory extraction call.
        memory_none: ``{memories}`` of ``memory_extract_prompt`` when there are none.
        media_changed: In place of media whose bytes changed since it was attached.
        media_unreadable: In place of media that could not be read (or converted to text).
        media_over_budget: In place of media beyond the media budget of a model call.
        media_unavailable: In place of media the model cannot take, without an adapter.
        media_as_text: In place of media the model cannot take: the adapter's text.
        media_tool_follow: Before a tool result's media, moved to a user message.
        mcp_tool_error: An MCP tool reported an error without saying what.
        mcp_media_omitted: In place of an MCP result's image or audio (``{kind}``, ``{mime}``).
        mcp_resource_link: An MCP result's link to a resource (``{uri}``).
        mcp_resource_omitted: In place of an MCP result's binary resource.
    """

    # -- calls the runtime settles itself --------------------------------------------------
    cancelled: str = (
        "Call {call_id} to {name} was cancelled before it started because new input arrived. "
        "Read the new input, then call the tool again if it is still needed."
    )
    not_carried: str = (
        "Call {call_id} to {name} did not run in this conversation. Call the tool again if it is "
        "still needed."
    )
    interrupted_replayable: str = (
        "Call {call_id} to {name} was interrupted before it finished. It is safe to call it again."
    )
    interrupted: str = (
        "Call {call_id} to {name} was interrupted before it finished; it changed nothing outside "
        "this conversation. Call it again if you still need its result."
    )
    needs_review: str = (
        "Call {call_id} to {name} was interrupted before it finished and may or may not have taken "
        "effect. Do not repeat it before checking whether it took effect."
    )
    interrupted_detail: str = "{outcome} ({why})"
    tool_host_failure: str = "{name} could not finish: {error}"
    tool_host_failure_hidden: str = "{name} could not finish because something it depends on failed"
    tool_timed_out: str = "{name} did not finish within {timeout} s"
    tool_cancelled: str = "{name} was cancelled"

    # -- errors the model can fix ----------------------------------------------------------
    unknown_tool: str = "There is no tool named {name!r}. Available tools: {available}."
    no_tools: str = "none"
    tool_removed: str = (
        "Call {call_id} to {name} did not run: the tool {name} is no longer available. Do not "
        "call it again; use the tools you have."
    )
    tool_changed: str = (
        "Call {call_id} to {name} did not run: the tool {name} changed while the call waited, "
        "and its arguments no longer fit: {error}. Call it again with arguments that fit if it "
        "is still needed."
    )
    invalid_arguments: str = "Invalid arguments for {name}: {error}. Fix them and call again."
    garbled_arguments: str = "they are not valid Unicode text (a lone surrogate)"
    args_separator: str = "; "
    args_whole: str = "the arguments"
    args_not_json: str = "the arguments are not valid JSON (at line {line}, column {column})"
    args_not_object: str = "the arguments must be a JSON object, got {got}"
    arg_missing: str = "{path}: missing required argument"
    field_missing: str = "{path}: missing required field"
    arg_unknown: str = "{path}: unknown argument (expected: {expected})"
    arg_unknown_none: str = "{path}: unknown argument (the tool takes no arguments)"
    field_unknown: str = "{path}: unknown field"
    arg_type: str = "{path}: expected {expected}, got {got}"
    arg_choice: str = "{path}: must be one of {allowed}, got {got}"
    arg_bound: str = "{path}: must be {bound}, got {got}"
    arg_multiple: str = "{path}: must be a multiple of {factor}, got {got}"
    arg_too_short: str = "{path}: too short (at least {limit}), got {got}"
    arg_too_long: str = "{path}: too long (at most {limit}), got {got}"
    arg_pattern: str = "{path}: must match the pattern {pattern}, got {got}"
    arg_invalid: str = "{path}: {error} (got {got})"
    args_more: str = "... and {count} more problem(s)"
    tool_error: str = "{name} failed: {error}"
    bad_policy_outcome: str = "its policy returned {kind}, not Submit, Confirm or None"
    result_unstorable: str = "its result cannot be stored: {error}"
    result_not_json: str = (
        "{name} ran, but its result cannot be shown: it returned a {kind}, which has no JSON form."
    )
    complete_outside_completion: str = "complete() may only be used by completion tools"
    completion_unstorable: str = "its completion cannot be stored: {error}"
    handover_unstorable: str = "what it handed over cannot be stored: {error}"
    unsupported_signal: str = "unsupported control signal {kind}"
    length_cut: str = (
        "Your last response was cut off by the output length limit before its tool calls were "
        "complete, so none of them ran. Make the calls again with shorter arguments, or fewer "
        "calls at once."
    )
    length_cut_text: str = (
        "Your last answer was cut off by the output length limit, so it was not delivered. "
        "Answer again, completely and more briefly."
    )
    cannot_suspend: str = (
        "{name} needs to wait for a person or system, which is not possible here; do without it "
        "or ask the user directly."
    )
    cannot_detach: str = "{name} cannot hand its work to an outside executor here."

    # -- people and hosts ------------------------------------------------------------------
    refused: str = "The call to {name} was refused: {reason}"
    rejected: str = "The call to {name} was rejected by a reviewer and did not run{reason}."
    rejected_reason: str = ": {reason}"
    edited_arguments: str = "(A reviewer changed the arguments before approving: {arguments}) "
    settled_result: str = (
        "The earlier call {call_id} to {name}, which went on outside this conversation, has "
        "finished. Its result: {result}"
    )
    settled_error: str = (
        "The earlier call {call_id} to {name}, which went on outside this conversation, has "
        "failed: {error}"
    )

    # -- completions -----------------------------------------------------------------------
    completion_not_alone: str = (
        "{name} ends the run and must be called alone, as the only call of a response; none of "
        "the calls ran. Call it again on its own."
    )
    completion_rejected: str = "The result was not accepted: {feedback}"

    # -- context management ----------------------------------------------------------------
    offload_note: str = (
        "[Result of {name} is {size} characters; the first {shown} are shown. Read more with "
        'read_offloaded_result(ref="{ref}", offset={shown}).]'
    )
    result_truncated: str = (
        "[Result of {name} is {size} characters; only the first {shown} are shown, and the rest "
        "cannot be read here.]"
    )
    cleared_note: str = (
        "[Result cleared to save context ({size} chars); read it again with "
        'read_offloaded_result(ref="{ref}").]'
    )
    cleared_note_plain: str = "[Result cleared to save context ({size} chars).]"
    read_unknown_ref: str = "there is no offloaded or cleared result {ref!r} in this run"
    read_range: str = "[characters {start}-{end} of {total}]"
    read_range_more: str = "[characters {start}-{end} of {total}; continue with offset={end}]"
    summary_instruction: str = (
        "You compress the earlier part of an agent's conversation so the agent can continue its "
        "work without it. Write a faithful, dense summary: the user's goals and constraints, "
        "decisions made, facts learned from tools (ids, numbers, names), what was done and what "
        "is still open. Do not invent anything. Do not address the user. Plain text only."
    )
    summary_request: str = "Summarize this conversation:\n\n{transcript}"
    summary_omitted: str = "[... the oldest part is omitted ...]"
    summary_marker: str = "[Summary of the conversation so far]\n{summary}"
    transcript_summary: str = "[earlier summary]\n{summary}"
    transcript_thinking: str = "{role} (thinking): {text}"
    transcript_call: str = "{role} called {name}({arguments})"
    transcript_result: str = "result of {name}: {content}"
    transcript_error: str = "result of {name} (error): {content}"

    # -- planning extension ----------------------------------------------------------------
    planning_instructions: str = (
        "Plan multi-step work with create_task, keep each task's status current with "
        "update_task (one task in_progress at a time), and read it with list_tasks."
    )
    planning_current_plan: str = "Current plan:\n{plan}"
    plan_created: str = "created {task_id}: {title}"
    plan_updated: str = "{task_id} is {status}: {title}"
    plan_task_notes: str = "notes: {notes}"
    plan_empty: str = "the plan is empty"
    plan_needs_title: str = "a task needs a title"
    plan_full: str = "the plan already holds {max_tasks} tasks"
    plan_bad_status: str = "status must be one of {statuses}"
    plan_unknown_task: str = "no task {task_id!r} in the plan (tasks: {known})"
    plan_no_tasks: str = "none"

    # -- deferred tools extension ----------------------------------------------------------
    search_no_match: str = "no tools match; try other words"
    search_found: str = "These tools are now available:\n{tools}"
    tool_not_found_yet: str = "{name} is not available yet; call {search_tool} to find it first"

    # -- sub-agents extension --------------------------------------------------------------
    subagent_instructions: str = (
        "You are a sub-agent working on one task for another agent. Use your tools as needed, "
        "then answer with the result; your answer is all the other agent will see."
    )
    subagent_output_instructions: str = "End by calling submit_result with your result."
    subagent_use_output_tool: str = "Do not answer in text: call submit_result with your result."
    subagent_failed: str = "the sub-agent did not finish: {why}"
    subagent_would_wait: str = "it could not finish without waiting for someone"
    subagent_follow_up: str = (
        "The sub-agent of your call {call_id} went on when its background work ended and "
        "answered:\n{text}"
    )
    subagent_follow_up_failed: str = (
        "The sub-agent of your call {call_id} went on when its background work ended and "
        "did not finish: {why}"
    )
    delegation_interrupted: str = (
        "The delegation was interrupted while its sub-agent was running {names}, whose outcome "
        "is unknown; check it before delegating this task again."
    )
    delegate_description: str = (
        "Hand a self-contained task to a sub-agent that has your tools; it works on its own and "
        "returns its result. Several delegations can run at once."
    )
    delegate_task_arg: str = (
        "The task, with everything the sub-agent needs to know (it does not see this conversation)."
    )
    submit_result_description: str = "Submit your final result; it ends your work."
    submit_result_arg: str = "The result."
    subagent_hit_limit: str = "it reached its limit of model calls ({limit})"
    subagent_over_budget: str = "it used up its budget of {measure} ({limit})"
    subagent_bad_output: str = "its answers could not be used"
    subagent_filtered: str = "a content filter stopped its model"
    subagent_model_failed: str = "its model call failed: {error}"
    work_interrupted: str = (
        "{what} was interrupted while its sub-agent was running {names}, whose outcome is "
        "unknown; check it before running this again."
    )

    # -- skills extension ------------------------------------------------------------------
    skills_instructions: str = (
        "Skills hold instructions for particular kinds of tasks. When a task matches a skill's "
        "description, call load_skill with its name first and follow what it says."
    )
    skills_fork_instructions: str = (
        " A skill marked (sub-agent) does the work itself: pass it the task with "
        "load_skill(name, task=...) and it returns the result."
    )
    skills_available: str = "\nAvailable skills:\n{skills}"
    skill_forked_mark: str = " (sub-agent)"
    skills_empty: str = "there are no skills"
    skills_none: str = "none"
    skill_unknown: str = "no skill {name!r} (skills: {known})"
    skill_loaded: str = "Skill {name!r} loaded. Follow these instructions.\n\n{instructions}"
    skill_resources: str = (
        '\n\nResources of this skill (read one with read_skill_resource(skill="{name}", '
        "path=...)):\n{resources}"
    )
    skill_fork_in_subagent: str = "skill {name!r} runs in a sub-agent; only the main agent can"
    skill_fork_needs_task: str = (
        "skill {name!r} runs in a sub-agent: call load_skill again with the task, giving "
        "everything it needs to know (it does not see this conversation)"
    )
    skill_failed: str = "the skill's sub-agent did not finish: {why}"
    skill_fork_preamble: str = (
        "You are a sub-agent carrying out the skill {name!r} for another agent, on the task you "
        "are given. Work on your own with your tools, then answer with the result; your answer "
        "is all the other agent will see. The skill's instructions follow."
    )
    skill_what: str = "The skill {name!r}"
    skill_resource_no_path: str = "give the resource's path, relative to the skill's folder"
    skill_resource_absolute: str = (
        "{path!r} is absolute; give a path relative to the skill's folder"
    )
    skill_resource_up: str = "{path!r} goes up with '..'; only files inside the skill may be read"
    skill_resource_unknown: str = (
        "skill {name!r} has no resource {path!r} (its resources: {resources})"
    )
    skill_resources_none: str = "none"
    skill_resource_outside: str = "{path!r} leads outside the skill's folder; it cannot be read"
    skill_resource_unreadable: str = "{path!r} could not be read: {error}"
    skill_resource_too_large: str = "{path!r} is larger than the limit of {max_bytes} bytes"
    skill_resource_not_text: str = "{path!r} is not UTF-8 text"

    # -- memory extension ------------------------------------------------------------------
    memory_tools_instructions: str = (
        "Keep lasting facts about the user with remember(text); drop wrong ones with "
        "forget(memory_id)."
    )
    memory_recalled: str = (
        "Relevant memories (from earlier conversations; they may be out of date):\n{memories}"
    )
    memory_remembered: str = "remembered as {memory_id}"
    memory_already: str = "already remembered as {memory_id}"
    memory_forgot: str = "forgot {memory_id}"
    memory_unknown: str = "no memory {memory_id} (already forgotten?)"
    memory_extract_instructions: str = (
        "You maintain long-term memories about the user, kept across conversations. Read the "
        "conversation and the existing memories, and list the changes to make:\n"
        "- add: a new lasting fact, preference or decision about the user (one per memory, a "
        'short sentence in the third person, e.g. "The user\'s dog is called Rex").\n'
        "- update: an existing memory the conversation refines or corrects (give its id and new "
        "text).\n"
        "- delete: an existing memory the conversation shows is wrong or no longer true (give its "
        "id).\n"
        "Leave out small talk, one-off requests and anything already remembered. No changes: an "
        "empty list."
    )
    memory_extract_prompt: str = "Existing memories:\n{memories}\n\nConversation:\n{conversation}"
    memory_none: str = "(none)"

    # -- media -----------------------------------------------------------------------------
    media_changed: str = "[{kind} {key} is not shown: it changed after it was attached]"
    media_unreadable: str = "[{kind} {key} is not shown: it could not be read]"
    media_over_budget: str = "[{kind} {key} is not shown: the media budget of this call is used up]"
    media_unavailable: str = "[{kind} {key} ({mime}) is not shown: this model cannot read {kind}]"
    media_as_text: str = "[{kind} {key} as text]\n{text}"
    media_tool_follow: str = "Media returned by {name} ({call_id}):"

    # -- MCP tools ---------------------------------------------------------------------------
    mcp_tool_error: str = "the tool reported an error"
    mcp_media_omitted: str = "[{kind} omitted: {mime}]"
    mcp_resource_link: str = "[resource: {uri}]"
    mcp_resource_omitted: str = "[resource omitted: {uri} ({mime})]"

    def __post_init__(self) -> None:
        """Check every field against its placeholders; all problems are reported at once."""
        problems = [
            problem
            for name, allowed in PLACEHOLDERS.items()
            if (problem := check_field(name, getattr(self, name), allowed)) is not None
        ]
        if problems:
            raise UsageError("invalid Texts:\n" + "\n".join(f"  {p}" for p in problems))

    # -- choosing and overriding -----------------------------------------------------------

    @classmethod
    def english(cls, **changes: str) -> Texts:
        """The English texts (the defaults), with ``changes`` applied.

        Args:
            **changes: Fields to override, by name.

        Returns:
            The texts.

        Raises:
            UsageError: A change names no field, or does not fit its field's placeholders.
        """
        return cls().replace(**changes)

    @classmethod
    def chinese(cls, **changes: str) -> Texts:
        """The Simplified Chinese texts, with ``changes`` applied.

        Args:
            **changes: Fields to override, by name.

        Returns:
            The texts.

        Raises:
            UsageError: A change names no field, or does not fit its field's placeholders.
        """
        check_names(changes, PLACEHOLDERS)
        return cls(**{**CHINESE, **changes})

    @classmethod
    def for_language(cls, language: str, **changes: str) -> Texts:
        """The texts of a built-in language, with ``changes`` applied.

        Args:
            language: A language code: ``"en"`` or ``"zh"`` (case-insensitive; regional
                variants such as ``"en-GB"``, ``"zh-CN"`` or ``"zh-Hans"`` are accepted;
                Traditional Chinese variants are not).
            **changes: Fields to override, by name.

        Returns:
            The texts.

        Raises:
            UsageError: The language is not built in, or a change does not fit its field.
        """
        code = language_code(language, LANGUAGES)
        if code == "zh":
            return cls.chinese(**changes)
        return cls.english(**changes)

    @staticmethod
    def languages() -> Mapping[str, str]:
        """The built-in languages: code -> English name."""
        return LANGUAGES

    @staticmethod
    def placeholders() -> Mapping[str, frozenset[str]]:
        """Each field's placeholder names (those of its English default)."""
        return PLACEHOLDERS

    def replace(self, **changes: str) -> Texts:
        """A copy with some fields overridden (like ``dataclasses.replace``, with checks).

        Args:
            **changes: Fields to override, by name.

        Returns:
            The new texts; ``self`` is unchanged.

        Raises:
            UsageError: A change names no field, or does not fit its field's placeholders.
        """
        check_names(changes, PLACEHOLDERS)
        return dataclasses.replace(self, **changes) if changes else self


def _placeholders() -> Mapping[str, frozenset[str]]:
    out = {}
    for f in dataclasses.fields(Texts):
        assert isinstance(f.default, str), f.name
        found, problems = names(f.default)
        assert not problems, (f.name, problems)
        out[f.name] = frozenset(found)
    return MappingProxyType(out)


PLACEHOLDERS: Mapping[str, frozenset[str]] = _placeholders()
"""Each field's placeholder names, as its English default defines them."""


@functools.cache
def default_texts() -> Texts:
    """The English texts, built once (for code that runs without a runtime's texts)."""
    return Texts()


def texts_of(handle: object) -> Texts:
    """The texts of a run handle (``RunHandle``), or the English ones when it has none."""
    for attr in ("texts", "_texts"):
        found = getattr(handle, attr, None)
        if isinstance(found, Texts):
            return found
    return default_texts()
