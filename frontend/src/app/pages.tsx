// The page registry: one entry per page gives its route and, optionally, its
// left-nav entry (`nav-<id>` test id). Pages other than the first ones are
// code-split with React.lazy so the entry chunk stays small and ECharts only
// loads with the pages (or the overview section) that draw charts.

import { lazy, type ReactNode } from "react";
import type { Role } from "../api/types";
import { NamespacesPage } from "../features/namespaces/NamespacesPage";
import { OverviewPage } from "../features/overview/OverviewPage";

const NamespaceDetailPage = lazy(() => import("../features/namespaces/NamespaceDetailPage"));
const PoliciesPage = lazy(() => import("../features/policies/PoliciesPage"));
const SegmentsPage = lazy(() => import("../features/segments/SegmentsPage"));
const TasksPage = lazy(() => import("../features/runs/TasksPage"));
const MessagesPage = lazy(() => import("../features/messages/MessagesPage"));
const NodesPage = lazy(() => import("../features/nodes/NodesPage"));
const AuditPage = lazy(() => import("../features/audit/AuditPage"));
const AlertsPage = lazy(() => import("../features/alerts/AlertsPage"));

export interface AppPage {
  /** Stable id: the nav link's test id is `nav-<id>`. */
  id: string;
  /** Route path under the app shell ("" = index "/"). */
  path: string;
  element: ReactNode;
  /** Left-nav label; pages without one (e.g. detail pages) are not in the nav. */
  navLabel?: string;
  /** Hide the nav entry below this role (the backend still enforces access). */
  minRole?: Role;
}

export const appPages: AppPage[] = [
  { id: "overview", path: "", element: <OverviewPage />, navLabel: "Overview" },
  { id: "alerts", path: "alerts", element: <AlertsPage />, navLabel: "Alerts" },
  { id: "namespaces", path: "namespaces", element: <NamespacesPage />, navLabel: "Namespaces" },
  { id: "namespace", path: "namespaces/:name", element: <NamespaceDetailPage /> },
  { id: "segments", path: "segments", element: <SegmentsPage />, navLabel: "Segments" },
  { id: "tasks", path: "tasks", element: <TasksPage />, navLabel: "Tasks" },
  { id: "messages", path: "messages", element: <MessagesPage />, navLabel: "Messages" },
  { id: "policies", path: "policies", element: <PoliciesPage />, navLabel: "Policies" },
  { id: "nodes", path: "nodes", element: <NodesPage />, navLabel: "Nodes" },
  { id: "audit", path: "audit", element: <AuditPage />, navLabel: "Audit" },
];
