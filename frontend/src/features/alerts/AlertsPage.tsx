import { useSearchParams } from "react-router";
import {
  useMe,
} from "../../api/queries";
import type {
  AlertState,
} from "../../api/types";
import { canAdminister, canOperate } from "../auth/roles";
import { tabPanelId, Tabs } from "../../components/Tabs";
import { usePageTitle } from "../../lib/hooks";
import { AlertList } from "./AlertList";
import { ChannelsSection } from "./ChannelsSection";
import { RulesSection } from "./RulesSection";

const STATES: AlertState[] = ["firing", "pending", "resolved"];
export default function AlertsPage() {
  usePageTitle("Alerts");
  const [search, setSearch] = useSearchParams();
  const state = (STATES.find((s) => s === search.get("state")) ?? "firing") as AlertState;
  const { data: user } = useMe();
  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Alerts</h1>
          <p className="muted">Alerts from the lifecycle rules; acknowledge or silence them, and manage rules and channels.</p>
        </div>
      </div>
      <Tabs
        tabs={STATES.map((s) => ({ value: s, label: s[0]!.toUpperCase() + s.slice(1) }))}
        value={state}
        onChange={(s) => setSearch({ state: s }, { replace: true })}
        label="Alert state"
        idPrefix="alerts"
      />
      <div role="tabpanel" id={tabPanelId("alerts", state)} aria-labelledby={`alerts-tab-${state}`}>
        <AlertList key={state} state={state} mayAct={canOperate(user)} />
      </div>
      <RulesSection mayEdit={canAdminister(user)} mayToggle={canOperate(user)} />
      <ChannelsSection mayEdit={canAdminister(user)} mayTest={canOperate(user)} />
    </div>
  );
}
