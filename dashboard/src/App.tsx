// The page frame: header (health badge, settings), navigation, and the routes.
import { ActionIcon, AppShell, Group, NavLink, Text, Title, Tooltip } from "@mantine/core";
import { lazy, Suspense, useEffect, useState } from "react";
import { Link, Route, Routes, useLocation } from "react-router";

import { HealthBadge } from "./components/HealthBadge";
import { Loading } from "./components/Loading";
import { SettingsContext } from "./components/settingsContext";
import { RolloutsPage } from "./pages/Rollouts";

// Only the first screen (the frame and the Rollouts page) is in the entry chunk: every
// other page, the settings dialog and the chart library load when the browser is idle
// after it, or when first needed, so the first render stays light.
const loadRolloutDetail = () => import("./pages/RolloutDetail");
const loadTraining = () => import("./pages/Training");
const loadResources = () => import("./pages/Resources");
const loadWorkers = () => import("./pages/Workers");
const loadSettings = () => import("./components/SettingsModal");

const RolloutDetailPage = lazy(() => loadRolloutDetail().then((m) => ({ default: m.RolloutDetailPage })));
const TrainingPage = lazy(loadTraining);
const ResourcesPage = lazy(() => loadResources().then((m) => ({ default: m.ResourcesPage })));
const WorkersPage = lazy(() => loadWorkers().then((m) => ({ default: m.WorkersPage })));
const SettingsModal = lazy(loadSettings);

/** Calls ``task`` once the browser has nothing better to do (after the first screen). */
function whenIdle(task: () => void): () => void {
  if (typeof window.requestIdleCallback === "function") {
    const id = window.requestIdleCallback(task, { timeout: 2000 });
    return () => window.cancelIdleCallback(id);
  }
  const id = setTimeout(task, 300); // Safari before 18 has no requestIdleCallback
  return () => clearTimeout(id);
}

const NAV = [
  { to: "/rollouts", label: "Rollouts" },
  { to: "/training", label: "Training" },
  { to: "/resources", label: "Resources" },
  { to: "/workers", label: "Workers" },
];

export function App() {
  const [settingsOpen, setSettingsOpen] = useState(false);
  // The dialog is mounted (closed) once idle, so it opens with its usual transition.
  const [settingsMounted, setSettingsMounted] = useState(false);
  const location = useLocation();
  const active = location.pathname === "/" ? "/rollouts" : location.pathname;

  useEffect(
    () =>
      whenIdle(() => {
        setSettingsMounted(true);
        [loadRolloutDetail, loadTraining, loadResources, loadWorkers].forEach((load) => load().catch(() => {}));
      }),
    [],
  );
  const openSettings = () => {
    setSettingsMounted(true);
    setSettingsOpen(true);
  };

  return (
    <SettingsContext.Provider value={{ open: openSettings }}>
      <AppShell header={{ height: 52 }} navbar={{ width: 180, breakpoint: 0 }} padding="md">
        <AppShell.Header>
          <Group h="100%" px="md" justify="space-between">
            <Group gap="xs">
              <Title order={4}>
                <Link to="/rollouts" style={{ color: "inherit", textDecoration: "none" }}>
                  ⚡ agentbolt
                </Link>
              </Title>
              <Text c="dimmed" size="sm">
                dashboard
              </Text>
            </Group>
            <Group gap="sm">
              <HealthBadge />
              <Tooltip label="Server URL and admin token">
                <ActionIcon
                  variant="default"
                  size="lg"
                  aria-label="Settings"
                  data-testid="open-settings"
                  onClick={openSettings}
                >
                  ⚙
                </ActionIcon>
              </Tooltip>
            </Group>
          </Group>
        </AppShell.Header>
        <AppShell.Navbar p="xs">
          {NAV.map((item) => (
            <NavLink
              key={item.to}
              component={Link}
              to={item.to}
              label={item.label}
              active={active.startsWith(item.to)}
              data-testid={`nav-${item.label.toLowerCase()}`}
            />
          ))}
        </AppShell.Navbar>
        <AppShell.Main>
          <Suspense fallback={<Loading />}>
            <Routes>
              <Route path="/" element={<RolloutsPage />} />
              <Route path="/rollouts" element={<RolloutsPage />} />
              <Route path="/rollouts/*" element={<RolloutDetailPage />} />
              <Route path="/training" element={<TrainingPage />} />
              <Route path="/resources" element={<ResourcesPage />} />
              <Route path="/workers" element={<WorkersPage />} />
              <Route path="*" element={<Text>No such page. Pick one on the left.</Text>} />
            </Routes>
          </Suspense>
        </AppShell.Main>
      </AppShell>
      {settingsMounted && (
        <Suspense fallback={null}>
          <SettingsModal opened={settingsOpen} onClose={() => setSettingsOpen(false)} />
        </Suspense>
      )}
    </SettingsContext.Provider>
  );
}
