// A form from a JSON schema: string, number, integer, boolean, enum, objects with properties;
// anything else is a JSON text area. fieldFor returns {el, read}.

import { h } from "./dom.js";

export function fieldFor(schema, label, required) {
  schema = schema || {};
  const title = h("label", {}, `${schema.title || label}${required ? " *" : ""}`);
  if (Array.isArray(schema.enum)) {
    const select = h("select", { "aria-label": label },
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((v, i) => h("option", { value: String(i) }, String(v))));
    return { el: h("div", { class: "field" }, title, select),
      read: () => (select.value === "" ? undefined : schema.enum[Number(select.value)]) };
  }
  if (schema.type === "string") {
    const input = h("input", { "aria-label": label, placeholder: schema.description || "" });
    return { el: h("div", { class: "field" }, title, input),
      read: () => (input.value === "" && !required ? undefined : input.value) };
  }
  if (schema.type === "number" || schema.type === "integer") {
    const input = h("input", { type: "number", step: schema.type === "integer" ? "1" : "any", "aria-label": label });
    return { el: h("div", { class: "field" }, title, input), read: () => {
      if (input.value === "") return undefined;
      return schema.type === "integer" ? parseInt(input.value, 10) : Number(input.value);
    } };
  }
  if (schema.type === "boolean") {
    const box = h("input", { type: "checkbox", "aria-label": label });
    return { el: h("div", { class: "field check" }, h("label", {}, box, schema.title || label)), read: () => box.checked };
  }
  if (schema.type === "object" && schema.properties) {
    const need = new Set(schema.required || []);
    const parts = Object.entries(schema.properties).map(([k, sub]) => [k, fieldFor(sub, k, need.has(k))]);
    return { el: h("div", { class: "field" }, parts.map(([, f]) => f.el)), read: () => {
      const out = {};
      for (const [k, f] of parts) { const v = f.read(); if (v !== undefined) out[k] = v; }
      return out;
    } };
  }
  const area = h("textarea", { "aria-label": label, placeholder: "JSON" });
  return { el: h("div", { class: "field" }, title, area), read: () => {
    if (area.value.trim() === "") return undefined;
    try { return JSON.parse(area.value); } catch { return area.value; }
  } };
}
