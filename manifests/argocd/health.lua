-- Argo CD health check for handroll.dev WebApps. It reads a WebApp as
-- kstatus does (docs/gitops.md): a generation handroll has not observed yet,
-- or Reconciling=True, is Progressing; Stalled=True is Degraded; otherwise
-- Ready decides. Install it in argocd-cm under
-- resource.customizations.health.handroll.dev_WebApp. It uses only Lua's
-- base library, which is all Argo CD opens for a script from argocd-cm.
local hs = {}
if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion"
  return hs
end
local generation = obj.metadata.generation
if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for handroll to observe generation " .. tostring(generation)
  return hs
end
local ready = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then
    hs.status = "Degraded"
    hs.message = (c.reason or "Stalled") .. ": " .. (c.message or "")
    return hs
  end
  if c.type == "Reconciling" and c.status == "True" then
    hs.status = "Progressing"
    hs.message = c.message or "Reconciling"
    return hs
  end
  if c.type == "Ready" then
    ready = c
  end
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = (ready.reason or "NotReady") .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for handroll to report Ready"
end
return hs
