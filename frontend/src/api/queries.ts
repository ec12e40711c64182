// TanStack Query hooks and keys. Pages use these, never fetch directly.

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  createNamespace,
  getHealth,
  getMe,
  listNamespaces,
  login,
  logout,
} from "./client";
import type { LoginRequest, Namespace, NamespaceCreate, User } from "./types";

export const queryKeys = {
  me: ["auth", "me"] as const,
  health: ["health"] as const,
  namespaces: ["namespaces", "list"] as const,
};

export const HEALTH_REFRESH_MS = 5_000;

export function useMe() {
  return useQuery({
    queryKey: queryKeys.me,
    queryFn: ({ signal }) => getMe(signal),
    staleTime: 60_000,
    retry: 1,
  });
}

export function useHealth(options: { refetchInterval?: number | false } = {}) {
  return useQuery({
    queryKey: queryKeys.health,
    queryFn: ({ signal }) => getHealth(signal),
    refetchInterval: options.refetchInterval ?? HEALTH_REFRESH_MS,
    // Keep polling in a background tab? No: operators look at it when visible.
    refetchIntervalInBackground: false,
    retry: false,
  });
}

export function useLogin() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (credentials: LoginRequest) => login(credentials),
    onSuccess: (user: User) => {
      qc.setQueryData(queryKeys.me, user);
    },
  });
}

export function useLogout() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => logout(),
    onSuccess: () => {
      // Drop everything cached for the previous user.
      qc.removeQueries({ predicate: (q) => q.queryKey[0] !== "health" });
      qc.setQueryData(queryKeys.me, null);
    },
  });
}

export function useNamespaces() {
  return useQuery({
    queryKey: queryKeys.namespaces,
    queryFn: ({ signal }) => listNamespaces(signal),
  });
}

export function useCreateNamespace() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: NamespaceCreate) => createNamespace(body),
    onSuccess: (created: Namespace) => {
      // Show the new row at once, then reconcile with the server.
      qc.setQueryData<{ items: Namespace[]; truncated: boolean }>(queryKeys.namespaces, (old) => {
        if (!old) return old;
        if (old.items.some((n) => n.name === created.name)) return old;
        return { ...old, items: [...old.items, created] };
      });
      void qc.invalidateQueries({ queryKey: queryKeys.namespaces });
    },
  });
}
