import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";
import { ApiError } from "../api/client";
import { queryKeys } from "../api/queries";

/**
 * A 401/403 from any data query may mean the session expired: re-check who
 * we are. If /api/auth/me then says "not logged in", the route guard sends
 * the user to /login. (A 403 that is a real permission error leaves `me`
 * unchanged and the page shows the message.)
 */
export function createQueryClient(): QueryClient {
  let client: QueryClient;
  const onAuthError = (error: unknown, key?: readonly unknown[]) => {
    if (!(error instanceof ApiError) || !error.isUnauthenticated) return;
    if (key && key[0] === queryKeys.me[0]) return;
    void client.invalidateQueries({ queryKey: queryKeys.me });
  };
  client = new QueryClient({
    queryCache: new QueryCache({ onError: (error, query) => onAuthError(error, query.queryKey) }),
    mutationCache: new MutationCache({ onError: (error) => onAuthError(error) }),
    defaultOptions: {
      queries: {
        retry: (failureCount, error) => {
          if (error instanceof ApiError && error.status >= 400 && error.status < 500) return false;
          return failureCount < 2;
        },
        refetchOnWindowFocus: true,
        staleTime: 10_000,
      },
      mutations: { retry: false },
    },
  });
  return client;
}
