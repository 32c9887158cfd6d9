"""The Simplified Chinese model-visible texts: ``Texts.chinese()``.

One entry per field of ``Texts``, with the same placeholders as the English default (checked
when the ``Texts`` is built, and by the tests). Identifiers the model must use as they are
(tool names, argument names, status values such as ``in_progress``) stay untranslated.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CHINESE"]

CHINESE: Mapping[str, str] = MappingProxyType(
    {
        # -- calls the runtime settles itself ----------------------------------------------
        "cancelled": (
            "对 {name} 的调用 {call_id} 尚未开始就已取消，因为有新的输入到达。"
            "请先阅读新的输入；如果仍然需要，再重新调用该工具。"
        ),
        "not_carried": (
            "对 {name} 的调用 {call_id} 没有在本次对话中执行。如果仍然需要，请再次调用该工具。"
        ),
        "interrupted_replayable": (
            "对 {name} 的调用 {call_id} 在完成前被中断。可以放心地再次调用。"
        ),
        "interrupted": (
            "对 {name} 的调用 {call_id} 在完成前被中断；它没有改变本次对话之外的任何内容。"
            "如果仍需要它的结果，请再次调用。"
        ),
        "needs_review": (
            "对 {name} 的调用 {call_id} 在完成前被中断，可能已经生效，也可能没有。"
            "在确认它是否已经生效之前，不要重复调用。"
        ),
        "interrupted_detail": "{outcome}（{why}）",
        "tool_host_failure": "{name} 未能完成：{error}",
        "tool_host_failure_hidden": "{name} 因其依赖的服务出错而未能完成",
        "tool_timed_out": "{name} 未在 {timeout} 秒内完成",
        "tool_cancelled": "{name} 已被取消",
        # -- errors the model can fix ------------------------------------------------------
        "unknown_tool": "没有名为 {name!r} 的工具。可用的工具：{available}。",
        "no_tools": "无",
        "tool_removed": (
            "调用 {call_id}（{name}）没有执行：工具 {name} 已不再可用。"
            "请不要再调用它，改用现有的工具。"
        ),
        "tool_changed": (
            "调用 {call_id}（{name}）没有执行：在调用等待期间工具 {name} 发生了变化，"
            "它的参数已不再符合：{error}。如果仍然需要，请用符合的参数重新调用。"
        ),
        "invalid_arguments": "{name} 的参数无效：{error}。请修正后重新调用。",
        "garbled_arguments": "它们不是有效的 Unicode 文本（含有孤立的代理字符）",
        "args_separator": "；",
        "args_whole": "参数整体",
        "args_not_json": "参数不是有效的 JSON（第 {line} 行第 {column} 列）",
        "args_not_object": "参数必须是一个 JSON 对象，收到的是 {got}",
        "arg_missing": "{path}：缺少必需的参数",
        "field_missing": "{path}：缺少必需的字段",
        "arg_unknown": "{path}：未知的参数（可用的参数：{expected}）",
        "arg_unknown_none": "{path}：未知的参数（该工具不接受参数）",
        "field_unknown": "{path}：未知的字段",
        "arg_type": "{path}：应为 {expected} 类型，收到的是 {got}",
        "arg_choice": "{path}：必须是 {allowed} 之一，收到的是 {got}",
        "arg_bound": "{path}：必须 {bound}，收到的是 {got}",
        "arg_multiple": "{path}：必须是 {factor} 的倍数，收到的是 {got}",
        "arg_too_short": "{path}：太短（至少为 {limit}），收到的是 {got}",
        "arg_too_long": "{path}：太长（至多为 {limit}），收到的是 {got}",
        "arg_pattern": "{path}：必须匹配正则表达式 {pattern}，收到的是 {got}",
        "arg_invalid": "{path}：{error}（收到的是 {got}）",
        "args_more": "……另有 {count} 个问题",
        "tool_error": "{name} 执行失败：{error}",
        "bad_policy_outcome": "它的策略返回了 {kind}，而不是 Submit、Confirm 或 None",
        "result_unstorable": "它的结果无法保存：{error}",
        "result_not_json": "{name} 已运行，但其结果无法显示：它返回了 {kind}，该值没有 JSON 形式。",
        "complete_outside_completion": "只有完成工具才能使用 complete()",
        "completion_unstorable": "它的完成值无法保存：{error}",
        "handover_unstorable": "它移交的内容无法保存：{error}",
        "unsupported_signal": "不支持的控制信号 {kind}",
        "length_cut": (
            "你上一条回复在工具调用写完之前就被输出长度限制截断了，因此其中的调用都没有执行。"
            "请重新发起这些调用：缩短参数，或者一次少发几个调用。"
        ),
        "length_cut_text": (
            "你上一次的回答被输出长度限制截断了，因此没有交付。请重新回答，完整而更简短。"
        ),
        "cannot_suspend": (
            "{name} 需要等待某个人或系统的回应，但这里无法等待；"
            "请在不使用它的情况下完成，或直接询问用户。"
        ),
        "cannot_detach": "{name} 在这里无法把工作交给外部执行者。",
        # -- people and hosts --------------------------------------------------------------
        "refused": "对 {name} 的调用被拒绝：{reason}",
        "rejected": "对 {name} 的调用被审核者驳回，没有执行{reason}。",
        "rejected_reason": "：{reason}",
        "edited_arguments": "（审核者在批准前修改了参数：{arguments}）",
        "settled_result": (
            "之前对 {name} 的调用 {call_id} 在本对话之外继续进行，现已完成。其结果：{result}"
        ),
        "settled_error": "之前对 {name} 的调用 {call_id} 在本对话之外继续进行，现已失败：{error}",
        # -- completions -------------------------------------------------------------------
        "completion_not_alone": (
            "{name} 会结束本次运行，必须单独调用，即作为一条回复中唯一的调用；"
            "这些调用都没有执行。请单独再调用一次。"
        ),
        "completion_rejected": "结果未被接受：{feedback}",
        # -- context management ------------------------------------------------------------
        "offload_note": (
            "[{name} 的结果共 {size} 个字符，此处只显示前 {shown} 个。"
            '可用 read_offloaded_result(ref="{ref}", offset={shown}) 读取更多内容。]'
        ),
        "result_truncated": (
            "[{name} 的结果有 {size} 个字符，只显示了前 {shown} 个，其余部分在此无法读取。]"
        ),
        "cleared_note": (
            "[为节省上下文，此结果已被清除（{size} 个字符）；"
            '可用 read_offloaded_result(ref="{ref}") 重新读取。]'
        ),
        "cleared_note_plain": "[为节省上下文，此结果已被清除（{size} 个字符）。]",
        "read_unknown_ref": "本次运行中没有已转存或已清除的结果 {ref!r}",
        "read_range": "[第 {start}-{end} 个字符，共 {total} 个]",
        "read_range_more": "[第 {start}-{end} 个字符，共 {total} 个；请用 offset={end} 继续读取]",
        "summary_instruction": (
            "你负责压缩一个智能体对话中较早的部分，使智能体在没有这部分内容的情况下也能继续工作。"
            "请写一份忠实而精炼的摘要：用户的目标和约束、已经做出的决定、从工具中得到的事实"
            "（编号、数字、名称）、已经完成的工作以及尚未解决的事项。"
            "不要编造任何内容。不要对用户说话。只使用纯文本。"
        ),
        "summary_request": "请总结以下对话：\n\n{transcript}",
        "summary_omitted": "[……最早的部分已省略……]",
        "summary_marker": "[此前对话的摘要]\n{summary}",
        "transcript_summary": "[更早的摘要]\n{summary}",
        "transcript_thinking": "{role}（思考）：{text}",
        "transcript_call": "{role} 调用了 {name}({arguments})",
        "transcript_result": "{name} 的结果：{content}",
        "transcript_error": "{name} 的结果（出错）：{content}",
        # -- planning extension ------------------------------------------------------------
        "planning_instructions": (
            "多步骤的工作请用 create_task 制定计划，用 update_task 随时更新每个任务的状态"
            "（同一时间只能有一个任务处于 in_progress），并用 list_tasks 查看计划。"
        ),
        "planning_current_plan": "当前计划：\n{plan}",
        "plan_created": "已创建 {task_id}：{title}",
        "plan_updated": "{task_id} 现为 {status}：{title}",
        "plan_task_notes": "备注：{notes}",
        "plan_empty": "计划为空",
        "plan_needs_title": "任务需要一个标题",
        "plan_full": "计划已满，已有 {max_tasks} 个任务",
        "plan_bad_status": "status 必须是以下之一：{statuses}",
        "plan_unknown_task": "计划中没有任务 {task_id!r}（现有任务：{known}）",
        "plan_no_tasks": "无",
        # -- deferred tools extension ------------------------------------------------------
        "search_no_match": "没有匹配的工具；请换些词再试",
        "search_found": "以下工具现在可以使用：\n{tools}",
        "tool_not_found_yet": "{name} 目前还不可用；请先调用 {search_tool} 找到它",
        # -- sub-agents extension ----------------------------------------------------------
        "subagent_instructions": (
            "你是一个子智能体，正在为另一个智能体完成一项任务。根据需要使用你的工具，"
            "然后给出结果；另一个智能体只能看到你的回答。"
        ),
        "subagent_output_instructions": "最后请调用 submit_result 提交你的结果。",
        "subagent_use_output_tool": "不要用文字作答：请调用 submit_result 提交你的结果。",
        "subagent_failed": "子智能体没有完成：{why}",
        "subagent_would_wait": "它必须等待他人才能完成",
        "subagent_follow_up": (
            "你的调用 {call_id} 的子智能体在其后台工作结束后继续运行，回答：\n{text}"
        ),
        "subagent_follow_up_failed": (
            "你的调用 {call_id} 的子智能体在其后台工作结束后继续运行，但没有完成：{why}"
        ),
        "delegation_interrupted": (
            "委派在其子智能体运行 {names} 时被中断，结果未知；"
            "再次委派这项任务之前，请先确认它是否已经生效。"
        ),
        "delegate_description": (
            "把一项自成一体的任务交给一个拥有你的工具的子智能体；它会独立完成并返回结果。"
            "可以同时进行多项委派。"
        ),
        "delegate_task_arg": "要完成的任务，须包含子智能体需要知道的一切（它看不到这段对话）。",
        "submit_result_description": "提交你的最终结果；提交后你的工作即告结束。",
        "submit_result_arg": "结果。",
        "subagent_hit_limit": "它用完了模型调用次数的上限（{limit}）",
        "subagent_over_budget": "它用完了 {measure} 的预算（{limit}）",
        "subagent_bad_output": "它的回答无法使用",
        "subagent_filtered": "它的模型回复被内容过滤器拦截",
        "subagent_model_failed": "它的模型调用失败：{error}",
        "work_interrupted": (
            "{what}在其子智能体运行 {names} 时被中断，结果未知；"
            "再次运行之前，请先确认它是否已经生效。"
        ),
        # -- skills extension --------------------------------------------------------------
        "skills_instructions": (
            "技能包含处理特定类型任务的说明。当任务符合某个技能的描述时，"
            "请先用该技能的名称调用 load_skill，再按其中的说明去做。"
        ),
        "skills_fork_instructions": (
            "标有（子智能体）的技能会自己完成工作：用 load_skill(name, task=...) "
            "把任务交给它，它会返回结果。"
        ),
        "skills_available": "\n可用的技能：\n{skills}",
        "skill_forked_mark": "（子智能体）",
        "skills_empty": "没有任何技能",
        "skills_none": "无",
        "skill_unknown": "没有技能 {name!r}（现有技能：{known}）",
        "skill_loaded": "技能 {name!r} 已加载。请按以下说明去做。\n\n{instructions}",
        "skill_resources": (
            '\n\n此技能的资源文件（用 read_skill_resource(skill="{name}", path=...) 读取）：'
            "\n{resources}"
        ),
        "skill_fork_in_subagent": "技能 {name!r} 在子智能体中运行；只有主智能体可以使用它",
        "skill_fork_needs_task": (
            "技能 {name!r} 在子智能体中运行：请带上任务再次调用 load_skill，"
            "任务中须包含它需要知道的一切（它看不到这段对话）"
        ),
        "skill_failed": "技能的子智能体没有完成：{why}",
        "skill_fork_preamble": (
            "你是一个子智能体，正在为另一个智能体执行技能 {name!r}，完成交给你的任务。"
            "请使用你的工具独立完成，然后给出结果；另一个智能体只能看到你的回答。"
            "以下是该技能的说明。"
        ),
        "skill_what": "技能 {name!r} ",
        "skill_resource_no_path": "请给出资源文件的路径，相对于技能的文件夹",
        "skill_resource_absolute": "{path!r} 是绝对路径；请给出相对于技能文件夹的路径",
        "skill_resource_up": "{path!r} 用 '..' 向上跳出；只能读取技能文件夹内的文件",
        "skill_resource_unknown": (
            "技能 {name!r} 没有资源文件 {path!r}（它的资源文件：{resources}）"
        ),
        "skill_resources_none": "无",
        "skill_resource_outside": "{path!r} 指向技能文件夹之外，无法读取",
        "skill_resource_unreadable": "无法读取 {path!r}：{error}",
        "skill_resource_too_large": "{path!r} 超过了 {max_bytes} 字节的上限",
        "skill_resource_not_text": "{path!r} 不是 UTF-8 文本",
        # -- memory extension --------------------------------------------------------------
        "memory_tools_instructions": (
            "用 remember(text) 记下关于用户的长期事实；用 forget(memory_id) 删除错误的记忆。"
        ),
        "memory_recalled": "相关记忆（来自之前的对话，可能已经过时）：\n{memories}",
        "memory_remembered": "已记下，编号 {memory_id}",
        "memory_already": "已经记过了，编号 {memory_id}",
        "memory_forgot": "已删除 {memory_id}",
        "memory_unknown": "没有记忆 {memory_id}（也许已经删除了？）",
        "memory_extract_instructions": (
            "你负责维护关于用户的长期记忆，这些记忆会跨对话保留。阅读对话和已有的记忆，"
            "列出需要做的修改：\n"
            "- add：关于用户的一条新的长期事实、偏好或决定（每条记忆一件事，"
            "用第三人称写一句短句，例如“用户的狗叫 Rex”）。\n"
            "- update：对话补充或更正了的已有记忆（给出它的 id 和新的文本）。\n"
            "- delete：对话表明是错误的或已不再成立的已有记忆（给出它的 id）。\n"
            "不要记录闲聊、一次性的请求以及已经记住的内容。没有修改时：返回空列表。"
        ),
        "memory_extract_prompt": "已有的记忆：\n{memories}\n\n对话：\n{conversation}",
        "memory_none": "（无）",
        # -- media -------------------------------------------------------------------------
        "media_changed": "[{kind} {key} 未显示：它在附加之后被修改过]",
        "media_unreadable": "[{kind} {key} 未显示：无法读取]",
        "media_over_budget": "[{kind} {key} 未显示：本次调用的媒体额度已用完]",
        "media_unavailable": "[{kind} {key}（{mime}）未显示：此模型无法读取 {kind}]",
        "media_as_text": "[{kind} {key} 的文本内容]\n{text}",
        "media_tool_follow": "{name}（{call_id}）返回的媒体：",
        # -- MCP tools ---------------------------------------------------------------------
        "mcp_tool_error": "该工具报告了一个错误",
        "mcp_media_omitted": "[已省略{kind}：{mime}]",
        "mcp_resource_link": "[资源：{uri}]",
        "mcp_resource_omitted": "[已省略资源：{uri}（{mime}）]",
    }
)
"""The Chinese text of each field of ``Texts``."""
