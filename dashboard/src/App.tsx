// The page frame: header (health badge, settings), navigation, and the routes.
import { ActionIcon, AppShell, Group, NavLink, Text, Title, Tooltip } from "@mantine/core";
import { lazy, Suspense, useState } from "react";
import { Link, Route, Routes, useLocation } from "react-router";

import { HealthBadge } from "./components/HealthBadge";
import { Loading } from "./components/Loading";
import { SettingsContext, SettingsModal } from "./components/SettingsModal";
import { RolloutDetailPage } from "./pages/RolloutDetail";
import { RolloutsPage } from "./pages/Rollouts";
import { ResourcesPage } from "./pages/Resources";
import { WorkersPage } from "./pages/Workers";

// The chart library is only loaded on the Training page: the first render stays light.
const TrainingPage = lazy(() => import("./pages/Training"));

const NAV = [
  { to: "/rollouts", label: "Rollouts" },
  { to: "/training", label: "Training" },
  { to: "/resources", label: "Resources" },
  { to: "/workers", label: "Workers" },
];

export function App() {
  const [settingsOpen, setSettingsOpen] = useState(false);
  const location = useLocation();
  const active = location.pathname === "/" ? "/rollouts" : location.pathname;

  return (
    <SettingsContext.Provider value={{ open: () => setSettingsOpen(true) }}>
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
                  onClick={() => setSettingsOpen(true)}
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
      <SettingsModal opened={settingsOpen} onClose={() => setSettingsOpen(false)} />
    </SettingsContext.Provider>
  );
}
